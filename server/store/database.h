// SQL access to SQLite (a file in --data-dir) or PostgreSQL (--results-db postgresql://...),
// behind the few calls the stores need, so that both engines run the same SQL: parameters are
// written $1, $2, ... (SQLite reads "$1" as a named parameter), columns come back as text,
// NULL as nullopt. Thread-safety: every call may come from any thread. PostgreSQL is a pool of
// connections (each statement takes an idle one; a transaction holds one to its end); SQLite
// is one connection (a server alone on its --data-dir), its transactions one at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerneleval::server::store {

using SqlValue = std::variant<std::nullptr_t, std::int64_t, double, std::string>;
using SqlRow = std::vector<std::optional<std::string>>;

// Keys of the PostgreSQL advisory locks every kerneleval server agrees on.
inline constexpr std::int64_t kMigrationLockKey = 4242001601;
inline constexpr std::int64_t kRetentionLockKey = 4242001602;

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
  // Runs `body` in one transaction on one connection: `tx` sends every statement there (a
  // Transaction on `tx` joins this one). Committed when `body` returns OK, else rolled back
  // and its status returned. SQLite begins IMMEDIATE: the write lock is taken at once.
  virtual absl::Status Transaction(const std::function<absl::Status(Database& tx)>& body) = 0;
  // Inside a Transaction only: takes the advisory lock `key` until the transaction ends, so
  // that one server among those sharing the database does the work (migrations wait for it;
  // retention tries, and a server that does not get it leaves the work to the one that has
  // it). False when `wait` is false and another server holds it. SQLite: true (its
  // transaction already holds the database's only write lock).
  virtual absl::StatusOr<bool> LockUntilCommit(std::int64_t key, bool wait) = 0;
  // Statements sent so far, scripts counted as one: what a write costs, counted where it
  // happens rather than timed.
  std::int64_t statements() const { return statements_.load(std::memory_order_relaxed); }

 protected:
  void CountStatement() { statements_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> statements_{0};
};

// Opens (creating) the SQLite file at `path`, in WAL mode so that readers do not wait for the
// writer thread.
absl::StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path);

// A pool of up to `connections` libpq connections to `conninfo` (postgresql://user@host/db),
// opened as statements need them; with `connect_now`, one is opened at once to check that the
// database answers (UNAVAILABLE if not). A connection that breaks (a restarted database) is
// closed, and the next statement opens a fresh one. A statement fails UNAVAILABLE when the
// database could not be reached, INTERNAL when it refused the statement.
absl::StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo,
                                                       int connections = 1,
                                                       bool connect_now = true);

}  // namespace kerneleval::server::store
