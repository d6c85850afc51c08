// One SQL connection to SQLite (a file in --data-dir) or PostgreSQL (--results-db
// postgresql://...), behind the few calls the results store needs, so that both engines run
// the same SQL: parameters are written $1, $2, ... (SQLite reads "$1" as a named parameter),
// columns come back as text, NULL as nullopt. Thread-safety: calls are serialized inside.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerneleval::server::store {

using SqlValue = std::variant<std::nullptr_t, std::int64_t, double, std::string>;
using SqlRow = std::vector<std::optional<std::string>>;

class Database {
 public:
  virtual ~Database() = default;
  // "sqlite" or "postgresql".
  virtual const char* engine() const = 0;
  // Runs one statement; rows of a SELECT (or RETURNING), empty otherwise.
  virtual absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                                    const std::vector<SqlValue>& params = {}) = 0;
  // Runs a script of several statements without parameters (a migration).
  virtual absl::Status ExecScript(const std::string& sql) = 0;
  // Serializes schema migrations among every process that opens the same database (an
  // advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite); released by EndMigration.
  virtual absl::Status BeginMigration() = 0;
  virtual absl::Status EndMigration(bool commit) = 0;
};

// Opens (creating) the SQLite file at `path`, in WAL mode so that readers do not wait for the
// writer thread.
absl::StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path);

// Connects to PostgreSQL with a libpq connection string (postgresql://user@host:port/db).
absl::StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo);

}  // namespace kerneleval::server::store
