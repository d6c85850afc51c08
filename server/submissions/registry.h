// Registered submissions: by owner and content-hash id, and by owner and name. Bounded per
// owner and in total; in memory, and also one file per submission in a directory when one
// is given, so that a restarted server keeps them; or, for a fleet, in a database every
// server shares (RegistryOptions::shared), read on every lookup so that a delete through
// one server holds on all. Thread-safe.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/internal/compile.pb.h"
#include "server/submissions/submission_records.h"

namespace kerneleval::server::submissions {

// One page of an owner's submissions, by name.
struct SubmissionPage {
  std::vector<v1::Submission> submissions;
  bool more = false;  // submissions after the last one remain

  // Adds `s` as listed (without its source and log) unless the page already holds
  // `max_count` or would pass `max_bytes` (one submission always fits); false, with `more`
  // set, when it is full.
  bool Add(v1::Submission s, std::size_t max_count, std::size_t max_bytes);

 private:
  std::size_t bytes_ = 0;
};

struct RegistryOptions {
  std::string data_dir;  // empty: memory only; else <data_dir>/submissions/*.pb
  std::size_t max_per_owner = 64;
  std::size_t max_total = 1024;
  // Set: submissions live there, and data_dir is read only to move into it what an older
  // release kept there.
  std::shared_ptr<SubmissionRecords> shared;
};

class Registry {
 public:
  // Creates the directory if needed (mode 0700; each file is written 0600, and one an older
  // release wrote is narrowed to 0600) and loads what it holds; INTERNAL if it cannot be made
  // or read. Files that do not parse are skipped and reported in `skipped`. A stored compile
  // log longer than kMaxCompileLogBytes (an older release kept whole logs) is bounded, in
  // memory and in its file. With `shared` set, the files an older release kept in the data
  // directory are moved into it instead (each renamed *.pb.imported once the database holds
  // it) and nothing else is read from there.
  static absl::StatusOr<std::unique_ptr<Registry>> Open(
      RegistryOptions options, std::vector<std::string>* skipped = nullptr);

  // Adds `s` (submission.owner, .id and .spec.name set). true when added; false when the
  // owner had this very content under this name already (nothing changes). ALREADY_EXISTS
  // when the name holds other content or the content is registered under another name;
  // RESOURCE_EXHAUSTED at the limits; INTERNAL when the file cannot be written.
  absl::StatusOr<bool> Add(const internal::StoredSubmission& s);

  // By id ("sub-...") or by name, within the owner's submissions. NOT_FOUND otherwise.
  absl::StatusOr<internal::StoredSubmission> Find(const std::string& owner,
                                                  const std::string& id_or_name) const;

  // The owner's submissions by name after the name `after` ("" from the first), sources and
  // compile logs left out (GetSubmission has both): at most `max_count`, and no more than
  // `max_bytes` serialized unless one alone is larger, so that no number of registrations
  // makes an answer larger than a client takes. With a shared table, the database's error
  // (UNAVAILABLE while it is down): an empty page would say the owner has none.
  absl::StatusOr<SubmissionPage> List(const std::string& owner, const std::string& after,
                                      std::size_t max_count, std::size_t max_bytes) const;

  // Removes one (and its file); returns its id. NOT_FOUND when the owner has none such.
  absl::StatusOr<std::string> Delete(const std::string& owner, const std::string& id_or_name);

  std::size_t size() const;
  // How many `owner` holds (checked before a compile, so that a full owner compiles nothing).
  std::size_t CountOf(const std::string& owner) const;

 private:
  explicit Registry(RegistryOptions options) : options_(std::move(options)) {}
  std::string PathOf(const std::string& owner, const std::string& id) const;
  void ImportFiles(const std::filesystem::path& dir, std::vector<std::string>* skipped);
  const std::string* IdOf(const std::string& owner, const std::string& id_or_name) const;
  // The same methods on options_.shared.
  absl::StatusOr<bool> AddShared(const internal::StoredSubmission& s);
  absl::StatusOr<SubmissionPage> ListShared(const std::string& owner, const std::string& after,
                                            std::size_t max_count, std::size_t max_bytes) const;
  absl::StatusOr<std::string> DeleteShared(const std::string& owner, const std::string& id_or_name);

  const RegistryOptions options_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, internal::StoredSubmission> by_id_;
  std::map<std::pair<std::string, std::string>, std::string> by_name_;  // -> id
  std::map<std::string, std::size_t> per_owner_;
};

}  // namespace kerneleval::server::submissions
