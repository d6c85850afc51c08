#include <libpq-fe.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "server/store/database.h"

namespace kerneleval::server::store {
namespace {

using ConnectionPtr = std::unique_ptr<PGconn, void (*)(PGconn*)>;

absl::StatusOr<ConnectionPtr> Connect(const std::string& conninfo) {
  ConnectionPtr conn(PQconnectdb(conninfo.c_str()), PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    // The connection string may hold a password: only libpq's message is echoed.
    return absl::UnavailableError(
        absl::StrCat("--results-db: cannot connect: ", PQerrorMessage(conn.get())));
  }
  PQclear(PQexec(conn.get(), "SET client_min_messages = warning"));
  return conn;
}

// UNAVAILABLE when the database could not be reached (the connection broke, or the server is
// shutting down or starting: SQLSTATE classes 08 and 57), so that a caller may retry the
// statement on a fresh connection; INTERNAL for a statement the database refused.
absl::Status Failed(PGconn* conn, const PGresult* result) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string message = absl::StrCat("postgresql: ", PQerrorMessage(conn));
  const bool unreachable = PQstatus(conn) != CONNECTION_OK || state == nullptr ||
                           std::string(state).rfind("08", 0) == 0 ||
                           std::string(state).rfind("57", 0) == 0;
  return unreachable ? absl::UnavailableError(message) : absl::InternalError(message);
}

absl::StatusOr<std::vector<SqlRow>> Execute(PGconn* conn, const std::string& sql,
                                            const std::vector<SqlValue>& params) {
  // Every parameter travels as text; the server infers its type from the statement.
  std::vector<std::string> text(params.size());
  std::vector<const char*> values(params.size(), nullptr);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const SqlValue& v = params[i];
    if (std::holds_alternative<std::nullptr_t>(v)) continue;
    if (const auto* n = std::get_if<std::int64_t>(&v)) {
      text[i] = std::to_string(*n);
    } else if (const auto* d = std::get_if<double>(&v)) {
      char buf[32];
      snprintf(buf, sizeof(buf), "%.17g", *d);
      text[i] = buf;
    } else {
      text[i] = std::get<std::string>(v);
    }
    values[i] = text[i].c_str();
  }
  PGresult* result = PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                  values.data(), nullptr, nullptr, 0);
  std::unique_ptr<PGresult, void (*)(PGresult*)> owner(result, PQclear);
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Failed(conn, result);
  std::vector<SqlRow> rows;
  for (int r = 0; r < PQntuples(result); ++r) {
    SqlRow row;
    for (int c = 0; c < PQnfields(result); ++c) {
      if (PQgetisnull(result, r, c)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(result, r, c),
                                     static_cast<std::size_t>(PQgetlength(result, r, c))));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::Status ExecuteScript(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  std::unique_ptr<PGresult, void (*)(PGresult*)> owner(result, PQclear);
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Failed(conn, result);
  return absl::OkStatus();
}

class PostgresPool;

// One pooled connection held for a transaction's statements.
class HeldConnection final : public Database {
 public:
  HeldConnection(PostgresPool& pool, PGconn* conn) : pool_(pool), conn_(conn) {}
  const char* engine() const override { return "postgresql"; }
  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& params) override;
  absl::Status ExecScript(const std::string& sql) override;
  absl::Status Transaction(const std::function<absl::Status(Database& tx)>& body) override {
    return body(*this);
  }
  absl::StatusOr<bool> LockUntilCommit(std::int64_t key, bool wait) override {
    if (wait) {
      auto locked = Query("SELECT pg_advisory_xact_lock($1)", {key});
      if (!locked.ok()) return locked.status();
      return true;
    }
    auto rows = Query("SELECT pg_try_advisory_xact_lock($1)", {key});
    if (!rows.ok()) return rows.status();
    return rows->at(0).at(0) == "t";
  }

 private:
  PostgresPool& pool_;
  PGconn* conn_;
};

class PostgresPool final : public Database {
 public:
  PostgresPool(std::string conninfo, int size) : conninfo_(std::move(conninfo)), size_(size) {}

  const char* engine() const override { return "postgresql"; }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& params) override {
    auto conn = Checkout();
    if (!conn.ok()) return conn.status();
    CountStatement();
    auto rows = Execute(conn->get(), sql, params);
    Return(std::move(*conn));
    return rows;
  }

  absl::Status ExecScript(const std::string& sql) override {
    auto conn = Checkout();
    if (!conn.ok()) return conn.status();
    CountStatement();
    absl::Status s = ExecuteScript(conn->get(), sql);
    Return(std::move(*conn));
    return s;
  }

  absl::Status Transaction(const std::function<absl::Status(Database& tx)>& body) override {
    auto conn = Checkout();
    if (!conn.ok()) return conn.status();
    HeldConnection tx(*this, conn->get());
    absl::Status s = tx.ExecScript("BEGIN");
    if (s.ok()) s = body(tx);
    if (s.ok()) s = tx.ExecScript("COMMIT");
    if (!s.ok()) (void)tx.ExecScript("ROLLBACK");
    Return(std::move(*conn));
    return s;
  }

  absl::StatusOr<bool> LockUntilCommit(std::int64_t, bool) override {
    return absl::FailedPreconditionError("an advisory lock is taken inside a Transaction");
  }

  void Add(ConnectionPtr conn) {
    std::lock_guard<std::mutex> lock(mu_);
    ++open_;
    idle_.push_back(std::move(conn));
  }

  void CountHeldStatement() { CountStatement(); }

 private:
  // An idle connection, or a new one while fewer than size_ are open; else waits for one.
  absl::StatusOr<ConnectionPtr> Checkout() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !idle_.empty() || open_ < size_; });
    if (!idle_.empty()) {
      ConnectionPtr conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
    ++open_;
    lock.unlock();
    auto conn = Connect(conninfo_);
    if (!conn.ok()) {
      lock.lock();
      --open_;
      cv_.notify_one();
    }
    return conn;
  }

  // A connection that broke (the database restarted or went away) is closed, not pooled: the
  // next statement opens a fresh one.
  void Return(ConnectionPtr conn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (PQstatus(conn.get()) == CONNECTION_OK && PQtransactionStatus(conn.get()) == PQTRANS_IDLE) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
    cv_.notify_one();
  }

  const std::string conninfo_;
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ConnectionPtr> idle_;
  int open_ = 0;  // idle and checked out
};

absl::StatusOr<std::vector<SqlRow>> HeldConnection::Query(const std::string& sql,
                                                          const std::vector<SqlValue>& params) {
  pool_.CountHeldStatement();
  return Execute(conn_, sql, params);
}

absl::Status HeldConnection::ExecScript(const std::string& sql) {
  pool_.CountHeldStatement();
  return ExecuteScript(conn_, sql);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo, int connections,
                                                       bool connect_now) {
  auto pool = std::make_unique<PostgresPool>(conninfo, std::max(1, connections));
  if (connect_now) {
    auto first = Connect(conninfo);
    if (!first.ok()) return first.status();
    pool->Add(std::move(*first));
  }
  return pool;
}

}  // namespace kerneleval::server::store
