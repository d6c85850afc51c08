// The Registry on a database every server of a fleet shares (SubmissionRecords): the same
// answers as in memory, each read from the rows, so that what one server registered or
// deleted is what every other sees on its next call.
#include "absl/strings/str_cat.h"
#include "server/submissions/registry.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

absl::Status NoSuch(const std::string& owner, const std::string& id_or_name) {
  return absl::NotFoundError(
      absl::StrCat("submission: no submission ", Quote(id_or_name), " of ", Quote(owner)));
}

}  // namespace

absl::StatusOr<bool> Registry::AddShared(const internal::StoredSubmission& s) {
  SubmissionRecords& rows = *options_.shared;
  const std::string& owner = s.submission().owner();
  const std::string& id = s.submission().id();
  const std::string& name = s.submission().spec().name();
  auto named = rows.Find(owner, name);
  if (!named.ok()) return named.status();
  if (named->has_value() && (*named)->submission().spec().name() == name) {
    if ((*named)->submission().id() == id) return false;
    return absl::AlreadyExistsError(absl::StrCat(
        "submission.name: ", Quote(name), " is registered already with other content (id ",
        (*named)->submission().id(), "); delete it first or choose another name"));
  }
  auto same = rows.Find(owner, id);
  if (!same.ok()) return same.status();
  if (same->has_value() && (*same)->submission().id() == id) {
    return absl::AlreadyExistsError(
        absl::StrCat("submission: this content is registered already as ",
                     Quote((*same)->submission().spec().name()), " (id ", id, ")"));
  }
  auto held = rows.CountOf(owner);
  if (!held.ok()) return held.status();
  if (*held >= options_.max_per_owner) {
    return absl::ResourceExhaustedError(absl::StrCat("submission: ", Quote(owner), " holds ", *held,
                                                     " submissions, the most allowed; delete "
                                                     "one first"));
  }
  auto total = rows.Total();
  if (!total.ok()) return total.status();
  if (*total >= options_.max_total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("submission: the fleet holds ", *total, " submissions, the most allowed"));
  }
  auto inserted = rows.Insert(s);
  if (!inserted.ok()) return inserted.status();
  if (!*inserted) {
    // Another server registered this name or content between the checks and the insert.
    return absl::AlreadyExistsError(
        absl::StrCat("submission.name: ", Quote(name),
                     " or this content was registered meanwhile through "
                     "another server; list your submissions and delete or rename"));
  }
  return true;
}

absl::StatusOr<SubmissionPage> Registry::ListShared(const std::string& owner,
                                                    const std::string& after, std::size_t max_count,
                                                    std::size_t max_bytes) const {
  SubmissionPage page;
  auto rows = options_.shared->ListAfter(owner, after, max_count + 1);
  if (!rows.ok()) return rows.status();
  for (internal::StoredSubmission& row : *rows) {
    if (!page.Add(std::move(*row.mutable_submission()), max_count, max_bytes)) break;
  }
  return page;
}

absl::StatusOr<std::string> Registry::DeleteShared(const std::string& owner,
                                                   const std::string& id_or_name) {
  auto found = options_.shared->Find(owner, id_or_name);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NoSuch(owner, id_or_name);
  const std::string id = (*found)->submission().id();
  auto removed = options_.shared->Remove(owner, id);
  if (!removed.ok()) return removed.status();
  if (!*removed) return NoSuch(owner, id_or_name);  // deleted meanwhile through another server
  return id;
}

}  // namespace kerneleval::server::submissions
