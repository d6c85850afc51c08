#include <libpq-fe.h>

#include "absl/strings/str_cat.h"
#include "server/store/database.h"

namespace kerneleval::server::store {
namespace {

// Any key on which every kerneleval server agrees: migrations take it one at a time.
constexpr char kMigrationLockKey[] = "4242001601";

class PostgresDatabase final : public Database {
 public:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) {}
  ~PostgresDatabase() override { PQfinish(conn_); }

  const char* engine() const override { return "postgresql"; }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& params) override {
    std::lock_guard<std::mutex> lock(mu_);
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
    if (PQstatus(conn_) != CONNECTION_OK) PQreset(conn_);  // a restarted database
    PGresult* result = PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0);
    std::unique_ptr<PGresult, void (*)(PGresult*)> owner(result, PQclear);
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return absl::UnavailableError(absl::StrCat("postgresql: ", PQerrorMessage(conn_)));
    }
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

  absl::Status ExecScript(const std::string& sql) override {
    std::lock_guard<std::mutex> lock(mu_);
    PGresult* result = PQexec(conn_, sql.c_str());
    std::unique_ptr<PGresult, void (*)(PGresult*)> owner(result, PQclear);
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return absl::UnavailableError(absl::StrCat("postgresql: ", PQerrorMessage(conn_)));
    }
    return absl::OkStatus();
  }

  absl::Status BeginMigration() override {
    return ExecScript(absl::StrCat("SELECT pg_advisory_lock(", kMigrationLockKey, "); BEGIN"));
  }
  absl::Status EndMigration(bool commit) override {
    return ExecScript(absl::StrCat(commit ? "COMMIT" : "ROLLBACK", "; SELECT pg_advisory_unlock(",
                                   kMigrationLockKey, ")"));
  }

 private:
  std::mutex mu_;
  PGconn* conn_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    // The connection string may hold a password: only libpq's message is echoed.
    return absl::UnavailableError(absl::StrCat("--results-db: cannot connect: ", message));
  }
  PQclear(PQexec(conn, "SET client_min_messages = warning"));
  return std::make_unique<PostgresDatabase>(conn);
}

}  // namespace kerneleval::server::store
