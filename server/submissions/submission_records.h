// Where a fleet keeps its submissions: rows every server sharing one database reads and
// writes (server/store/submission_table.h implements it on the results database), so that a
// submission registered through one server resolves through any other, and a delete through
// one is seen by all. Rows only: the rules (names, limits, owners) stay in the Registry.
// Thread-safe; a database that cannot be reached is UNAVAILABLE.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/internal/compile.pb.h"

namespace kerneleval::server::submissions {

class SubmissionRecords {
 public:
  virtual ~SubmissionRecords() = default;
  // Inserts `s` (owner, id, spec.name set); false when the owner holds that id or that name
  // already (another server registered it first).
  virtual absl::StatusOr<bool> Insert(const internal::StoredSubmission& s) = 0;
  // The owner's submission of this id, else of this name; nullopt when none.
  virtual absl::StatusOr<std::optional<internal::StoredSubmission>> Find(
      const std::string& owner, const std::string& id_or_name) = 0;
  // The owner's submissions by name after `after_name`, at most `limit`.
  virtual absl::StatusOr<std::vector<internal::StoredSubmission>> ListAfter(
      const std::string& owner, const std::string& after_name, std::size_t limit) = 0;
  // Removes the owner's submission `id`; false when there was none.
  virtual absl::StatusOr<bool> Remove(const std::string& owner, const std::string& id) = 0;
  virtual absl::StatusOr<std::size_t> CountOf(const std::string& owner) = 0;
  virtual absl::StatusOr<std::size_t> Total() = 0;
};

}  // namespace kerneleval::server::submissions
