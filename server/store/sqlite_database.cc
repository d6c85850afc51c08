#include <sqlite3.h>

#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/store/database.h"

namespace kerneleval::server::store {
namespace {

class SqliteDatabase final : public Database {
 public:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }

  const char* engine() const override { return "sqlite"; }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& params) override {
    std::lock_guard<std::mutex> lock(mu_);
    CountStatement();
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK) {
      return Error("prepare");
    }
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owner(stmt, sqlite3_finalize);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string name = absl::StrCat("$", i + 1);
      const int index = sqlite3_bind_parameter_index(stmt, name.c_str());
      if (index == 0) continue;  // not used by this statement
      const SqlValue& v = params[i];
      int rc = SQLITE_OK;
      if (std::holds_alternative<std::nullptr_t>(v)) {
        rc = sqlite3_bind_null(stmt, index);
      } else if (const auto* n = std::get_if<std::int64_t>(&v)) {
        rc = sqlite3_bind_int64(stmt, index, *n);
      } else if (const auto* d = std::get_if<double>(&v)) {
        rc = sqlite3_bind_double(stmt, index, *d);
      } else {
        const std::string& s = std::get<std::string>(v);
        rc = sqlite3_bind_text(stmt, index, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) return Error("bind");
    }
    std::vector<SqlRow> rows;
    while (true) {
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("step");
      SqlRow row;
      const int columns = sqlite3_column_count(stmt);
      for (int c = 0; c < columns; ++c) {
        if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
          row.emplace_back(std::nullopt);
        } else if (sqlite3_column_type(stmt, c) == SQLITE_FLOAT) {
          // sqlite's own text conversion keeps 15 digits; %.17g round-trips.
          char buf[32];
          snprintf(buf, sizeof(buf), "%.17g", sqlite3_column_double(stmt, c));
          row.emplace_back(buf);
        } else {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
          row.emplace_back(
              std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt, c))));
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  absl::Status ExecScript(const std::string& sql) override {
    std::lock_guard<std::mutex> lock(mu_);
    CountStatement();
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      std::string text = message != nullptr ? message : "unknown error";
      sqlite3_free(message);
      return absl::InternalError(absl::StrCat("sqlite: ", text));
    }
    return absl::OkStatus();
  }

  // One transaction at a time on the one connection; a Transaction inside `body` joins it.
  absl::Status Transaction(const std::function<absl::Status(Database& tx)>& body) override {
    if (in_transaction_ == std::this_thread::get_id()) return body(*this);
    std::lock_guard<std::mutex> lock(transaction_mu_);
    in_transaction_ = std::this_thread::get_id();
    absl::Status s = ExecScript("BEGIN IMMEDIATE");
    if (s.ok()) s = body(*this);
    if (s.ok()) s = ExecScript("COMMIT");
    if (!s.ok()) (void)ExecScript("ROLLBACK");
    in_transaction_ = std::thread::id();
    return s;
  }

  absl::StatusOr<bool> LockUntilCommit(std::int64_t, bool) override { return true; }

 private:
  absl::Status Error(const char* step) {
    return absl::InternalError(absl::StrCat("sqlite ", step, ": ", sqlite3_errmsg(db_)));
  }

  std::mutex mu_;
  std::mutex transaction_mu_;
  std::atomic<std::thread::id> in_transaction_{};
  sqlite3* db_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return absl::UnavailableError(absl::StrCat("--data-dir: cannot open ", path, ": ", message));
  }
  // Another process (a second server on the same directory) may hold the write lock briefly.
  sqlite3_busy_timeout(db, 10000);
  auto database = std::make_unique<SqliteDatabase>(db);
  if (absl::Status s = database->ExecScript("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL");
      !s.ok()) {
    return s;
  }
  return database;
}

}  // namespace kerneleval::server::store
