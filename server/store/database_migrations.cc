#include <ctime>

#include "absl/strings/str_cat.h"
#include "server/store/migrations.h"
#include "server/store/result_store.h"

namespace kerneleval::server::store {

absl::Status Migrate(Database* db) {
  // One transaction under one lock: servers starting together on one empty database create
  // it once, and a migration that fails leaves nothing half applied.
  return db->Transaction([](Database& tx) -> absl::Status {
    if (auto locked = tx.LockUntilCommit(kMigrationLockKey, /*wait=*/true); !locked.ok()) {
      return locked.status();
    }
    if (auto created =
            tx.Query("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, "
                     "name TEXT NOT NULL, applied_at BIGINT NOT NULL)");
        !created.ok()) {
      return created.status();
    }
    auto applied = tx.Query("SELECT COALESCE(MAX(version), 0) FROM schema_version");
    if (!applied.ok()) return applied.status();
    const int current = std::stoi(applied->at(0).at(0).value_or("0"));
    for (const Migration& m : kMigrations) {
      if (m.version <= current) continue;
      if (absl::Status s = tx.ExecScript(m.sql); !s.ok()) {
        return absl::InternalError(absl::StrCat("migration ", m.name, ": ", s.message()));
      }
      if (auto s = tx.Query("INSERT INTO schema_version (version, name, applied_at) VALUES ($1, "
                            "$2, $3)",
                            {std::int64_t{m.version}, std::string(m.name),
                             static_cast<std::int64_t>(std::time(nullptr))});
          !s.ok()) {
        return s.status();
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace kerneleval::server::store
