#include "server/store/submission_table.h"

#include <ctime>

#include "absl/strings/escaping.h"

namespace kerneleval::server::store {
namespace {

using internal::StoredSubmission;

class SubmissionTable final : public submissions::SubmissionRecords {
 public:
  SubmissionTable(Database* db, std::function<absl::Status()> usable)
      : db_(db), usable_(std::move(usable)) {}

  absl::StatusOr<bool> Insert(const StoredSubmission& s) override {
    // A row of the same owner and id or name (another server's registration, committed
    // first) leaves this insert nothing to do: ON CONFLICT makes it a no-op both engines
    // share, and the count of rows it returned says which happened.
    auto rows = Query(
        "INSERT INTO submissions (owner, id, name, created_at, record) VALUES ($1, $2, $3, $4, "
        "$5) ON CONFLICT DO NOTHING RETURNING id",
        {s.submission().owner(), s.submission().id(), s.submission().spec().name(),
         static_cast<std::int64_t>(std::time(nullptr)), absl::Base64Escape(s.SerializeAsString())});
    if (!rows.ok()) return rows.status();
    return !rows->empty();
  }

  absl::StatusOr<std::optional<StoredSubmission>> Find(const std::string& owner,
                                                       const std::string& id_or_name) override {
    // An id before a name, as in memory: ORDER BY puts the id's row first.
    auto rows = Query(
        "SELECT record FROM submissions WHERE owner = $1 AND (id = $2 OR name = $2) ORDER BY "
        "CASE WHEN id = $2 THEN 0 ELSE 1 END LIMIT 1",
        {owner, id_or_name});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return std::nullopt;
    return Parse(rows->front());
  }

  absl::StatusOr<std::vector<StoredSubmission>> ListAfter(const std::string& owner,
                                                          const std::string& after_name,
                                                          std::size_t limit) override {
    auto rows = Query(
        "SELECT record FROM submissions WHERE owner = $1 AND name > $2 ORDER BY name LIMIT $3",
        {owner, after_name, static_cast<std::int64_t>(limit)});
    if (!rows.ok()) return rows.status();
    std::vector<StoredSubmission> out;
    for (const SqlRow& row : *rows) {
      auto parsed = Parse(row);
      if (!parsed.ok()) return parsed.status();
      out.push_back(std::move(*parsed));
    }
    return out;
  }

  absl::StatusOr<bool> Remove(const std::string& owner, const std::string& id) override {
    auto rows =
        Query("DELETE FROM submissions WHERE owner = $1 AND id = $2 RETURNING id", {owner, id});
    if (!rows.ok()) return rows.status();
    return !rows->empty();
  }

  absl::StatusOr<std::size_t> CountOf(const std::string& owner) override {
    return Count("SELECT COUNT(*) FROM submissions WHERE owner = $1", {owner});
  }

  absl::StatusOr<std::size_t> Total() override {
    return Count("SELECT COUNT(*) FROM submissions", {});
  }

 private:
  static absl::StatusOr<StoredSubmission> Parse(const SqlRow& row) {
    std::string bytes;
    StoredSubmission s;
    if (!absl::Base64Unescape(row.at(0).value_or(""), &bytes) || !s.ParseFromString(bytes)) {
      return absl::InternalError("submissions: a stored record does not parse");
    }
    return s;
  }

  absl::StatusOr<std::size_t> Count(const std::string& sql, const std::vector<SqlValue>& params) {
    auto rows = Query(sql, params);
    if (!rows.ok()) return rows.status();
    return static_cast<std::size_t>(std::stoll(rows->at(0).at(0).value_or("0")));
  }

  // Every statement goes through here: none before the store's migrations ran.
  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& params) {
    if (absl::Status s = usable_(); !s.ok()) return s;
    return db_->Query(sql, params);
  }

  Database* db_;
  std::function<absl::Status()> usable_;
};

}  // namespace

std::shared_ptr<submissions::SubmissionRecords> OpenSubmissionTable(
    Database* db, std::function<absl::Status()> usable) {
  return std::make_shared<SubmissionTable>(db, std::move(usable));
}

}  // namespace kerneleval::server::store
