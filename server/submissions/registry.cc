#include "server/submissions/registry.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/private_files.h"
#include "server/submissions/bounded_log.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace fs = std::filesystem;
namespace {

absl::Status DataDirError(const absl::Status& s) {
  return absl::InternalError(absl::StrCat("--data-dir: ", s.message()));
}

// A record written by a release that kept whole compile logs: its log bounded, the file
// rewritten so (mode 0600 with it). true when the record changed.
bool BoundStoredLog(internal::StoredSubmission& s, const fs::path& path) {
  v1::CompileDiagnostics* d = s.mutable_submission()->mutable_diagnostics();
  if (d->log().size() <= kMaxCompileLogBytes) return false;
  d->set_log(BoundedLog(d->log()));
  // Kept in memory bounded even where the file cannot be rewritten: the next load cuts again.
  (void)WritePrivateFile(path.string(), s.SerializeAsString());
  return true;
}

// One stored submission read from `path`: false where it does not parse. A compile log
// longer than the bound (an older release kept whole logs) is cut, in the file too.
bool ReadStoredFile(const fs::path& path, internal::StoredSubmission* s) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in || !s->ParseFromString(bytes.str()) || s->submission().id().empty()) return false;
  if (!BoundStoredLog(*s, path)) {
    std::error_code ec;
    fs::permissions(path, static_cast<fs::perms>(kPrivateFileMode), ec);  // read it still
  }
  return true;
}

// Each *.pb in `dir` that parses, to `fn`; the others named in `skipped`. The error of
// reading the directory, if any.
std::error_code ForEachStoredFile(
    const fs::path& dir, std::vector<std::string>* skipped,
    const std::function<void(const fs::path&, internal::StoredSubmission)>& fn) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".pb") continue;
    internal::StoredSubmission s;
    if (!ReadStoredFile(e.path(), &s)) {
      if (skipped != nullptr) skipped->push_back(e.path().string());
      continue;
    }
    fn(e.path(), std::move(s));
  }
  return ec;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Registry>> Registry::Open(RegistryOptions options,
                                                         std::vector<std::string>* skipped) {
  std::unique_ptr<Registry> r(new Registry(std::move(options)));
  if (r->options_.data_dir.empty()) return r;
  const fs::path dir = fs::path(r->options_.data_dir) / "submissions";
  if (r->options_.shared != nullptr) {
    r->ImportFiles(dir, skipped);
    return r;
  }
  if (absl::Status made = CreatePrivateDirectories(dir.string()); !made.ok()) {
    return DataDirError(made);
  }
  const std::error_code ec =
      ForEachStoredFile(dir, skipped, [&](const fs::path&, internal::StoredSubmission s) {
        const std::string owner = s.submission().owner();
        r->by_name_[{owner, s.submission().spec().name()}] = s.submission().id();
        ++r->per_owner_[owner];
        r->by_id_[{owner, s.submission().id()}] = std::move(s);
      });
  if (ec) {
    return absl::InternalError(
        absl::StrCat("--data-dir: cannot read '", dir.string(), "': ", ec.message()));
  }
  return r;
}

void Registry::ImportFiles(const fs::path& dir, std::vector<std::string>* skipped) {
  // Files an older release kept in the data directory move into the database: each one
  // inserted (or found there already) is renamed *.pb.imported, kept rather than deleted; one
  // the database cannot take now stays for the next start.
  ForEachStoredFile(dir, skipped, [&](const fs::path& path, internal::StoredSubmission s) {
    if (!options_.shared->Insert(s).ok()) return;
    std::error_code kept;  // a file that cannot be renamed is found in the database next time
    fs::rename(path, fs::path(path).concat(".imported"), kept);
  });
}

std::string Registry::PathOf(const std::string& owner, const std::string& id) const {
  // Owners are free text (a certificate subject): hex keeps them out of the path syntax.
  return (fs::path(options_.data_dir) / "submissions" /
          absl::StrCat(absl::BytesToHexString(owner), "-", id, ".pb"))
      .string();
}

const std::string* Registry::IdOf(const std::string& owner, const std::string& id_or_name) const {
  if (auto it = by_id_.find({owner, id_or_name}); it != by_id_.end()) {
    return &it->second.submission().id();
  }
  if (auto it = by_name_.find({owner, id_or_name}); it != by_name_.end()) return &it->second;
  return nullptr;
}

absl::StatusOr<bool> Registry::Add(const internal::StoredSubmission& s) {
  const std::string& owner = s.submission().owner();
  const std::string& id = s.submission().id();
  const std::string& name = s.submission().spec().name();
  if (options_.shared != nullptr) return AddShared(s);
  std::lock_guard<std::mutex> lock(mu_);
  const auto named = by_name_.find({owner, name});
  if (named != by_name_.end()) {
    if (named->second == id) return false;
    return absl::AlreadyExistsError(absl::StrCat(
        "submission.name: ", Quote(name), " is registered already with other content (id ",
        named->second, "); delete it first or choose another name"));
  }
  if (auto same = by_id_.find({owner, id}); same != by_id_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("submission: this content is registered already as ",
                     Quote(same->second.submission().spec().name()), " (id ", id, ")"));
  }
  if (per_owner_[owner] >= options_.max_per_owner) {
    return absl::ResourceExhaustedError(
        absl::StrCat("submission: ", Quote(owner), " holds ", per_owner_[owner],
                     " submissions, the most allowed; delete one first"));
  }
  if (by_id_.size() >= options_.max_total) {
    return absl::ResourceExhaustedError(absl::StrCat("submission: the server holds ", by_id_.size(),
                                                     " submissions, the most allowed"));
  }
  if (!options_.data_dir.empty()) {
    if (absl::Status written = WritePrivateFile(PathOf(owner, id), s.SerializeAsString());
        !written.ok()) {
      return DataDirError(written);
    }
  }
  by_id_[{owner, id}] = s;
  by_name_[{owner, name}] = id;
  ++per_owner_[owner];
  return true;
}

absl::StatusOr<internal::StoredSubmission> Registry::Find(const std::string& owner,
                                                          const std::string& id_or_name) const {
  if (options_.shared != nullptr) {
    auto found = options_.shared->Find(owner, id_or_name);
    if (!found.ok()) return found.status();
    if (found->has_value()) return **found;
    return absl::NotFoundError(
        absl::StrCat("submission: no submission ", Quote(id_or_name), " of ", Quote(owner)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const std::string* id = IdOf(owner, id_or_name);
  if (id == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("submission: no submission ", Quote(id_or_name), " of ", Quote(owner)));
  }
  return by_id_.at({owner, *id});
}

bool SubmissionPage::Add(v1::Submission s, std::size_t max_count, std::size_t max_bytes) {
  s.mutable_spec()->clear_source();
  s.mutable_diagnostics()->clear_log();
  bytes_ += s.ByteSizeLong();
  if (!submissions.empty() && (submissions.size() >= max_count || bytes_ > max_bytes)) {
    more = true;
    return false;
  }
  submissions.push_back(std::move(s));
  return true;
}

absl::StatusOr<SubmissionPage> Registry::List(const std::string& owner, const std::string& after,
                                              std::size_t max_count, std::size_t max_bytes) const {
  if (options_.shared != nullptr) return ListShared(owner, after, max_count, max_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  SubmissionPage page;
  for (auto it = by_name_.upper_bound({owner, after});
       it != by_name_.end() && it->first.first == owner; ++it) {
    if (!page.Add(by_id_.at({owner, it->second}).submission(), max_count, max_bytes)) break;
  }
  return page;
}

absl::StatusOr<std::string> Registry::Delete(const std::string& owner,
                                             const std::string& id_or_name) {
  if (options_.shared != nullptr) return DeleteShared(owner, id_or_name);
  std::lock_guard<std::mutex> lock(mu_);
  const std::string* found = IdOf(owner, id_or_name);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("submission: no submission ", Quote(id_or_name), " of ", Quote(owner)));
  }
  const std::string id = *found;
  if (!options_.data_dir.empty()) {
    std::error_code ec;
    fs::remove(PathOf(owner, id), ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("--data-dir: cannot remove '", PathOf(owner, id), "': ", ec.message()));
    }
  }
  const auto it = by_id_.find({owner, id});
  by_name_.erase({owner, it->second.submission().spec().name()});
  by_id_.erase(it);
  if (--per_owner_[owner] == 0) per_owner_.erase(owner);
  return id;
}

std::size_t Registry::size() const {
  if (options_.shared != nullptr) return options_.shared->Total().value_or(0);
  std::lock_guard<std::mutex> lock(mu_);
  return by_id_.size();
}

std::size_t Registry::CountOf(const std::string& owner) const {
  // A database that does not answer counts none here: Add, which asks again, refuses then.
  if (options_.shared != nullptr) return options_.shared->CountOf(owner).value_or(0);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_owner_.find(owner);
  return it == per_owner_.end() ? 0 : it->second;
}

}  // namespace kerneleval::server::submissions
