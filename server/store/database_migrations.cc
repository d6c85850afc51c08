#include <ctime>

#include "absl/strings/str_cat.h"
#include "server/store/migrations.h"
#include "server/store/result_store.h"

namespace kerneleval::server::store {

absl::Status Migrate(Database* db) {
  if (absl::Status s = db->BeginMigration(); !s.ok()) return s;
  auto fail = [db](absl::Status s) {
    (void)db->EndMigration(false);
    return s;
  };
  // Inside the lock: two servers starting on one empty database create it once.
  if (auto created =
          db->Query("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at BIGINT NOT NULL)");
      !created.ok()) {
    return fail(created.status());
  }
  auto applied = db->Query("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!applied.ok()) return fail(applied.status());
  const int current = std::stoi(applied->at(0).at(0).value_or("0"));
  for (const Migration& m : kMigrations) {
    if (m.version <= current) continue;
    if (absl::Status s = db->ExecScript(m.sql); !s.ok()) {
      return fail(absl::InternalError(absl::StrCat("migration ", m.name, ": ", s.message())));
    }
    if (auto s = db->Query("INSERT INTO schema_version (version, name, applied_at) VALUES ($1, "
                           "$2, $3)",
                           {std::int64_t{m.version}, std::string(m.name),
                            static_cast<std::int64_t>(std::time(nullptr))});
        !s.ok()) {
      return fail(s.status());
    }
  }
  return db->EndMigration(true);
}

}  // namespace kerneleval::server::store
