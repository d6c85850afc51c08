#include "server/core/admission.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"
#include "common/did_you_mean.h"
#include "common/status_macros.h"

namespace kerneleval::server {

absl::Status Admit(const ServiceState& state, bool needs_devices) {
  if (state.draining.load()) {
    return absl::UnavailableError("server is shutting down and accepts no new requests");
  }
  if (needs_devices && !state.warmed.load()) {
    return absl::UnavailableError("server is warming up; retry when readiness is SERVING");
  }
  return absl::OkStatus();
}

absl::Status StillWanted(const Caller& caller, const std::string& when) {
  if (caller.DeadlinePassed()) {
    return absl::DeadlineExceededError(absl::StrCat("deadline passed ", when, "; not started"));
  }
  if (caller.Cancelled()) {
    return absl::CancelledError(absl::StrCat("cancelled ", when, "; not started"));
  }
  return absl::OkStatus();
}

std::string InQueueOf(const Backend& backend, double queue_seconds) {
  return absl::StrCat("after ", queue_seconds, " s in the queue of ", backend.name());
}

absl::Status CheckTimerFits(v1::Timer timer, const Backend& backend, const char* field) {
  return CheckTimer(backend.capabilities(), timer, backend.name(), field);
}

absl::Status CheckImplementation(const Backend& backend, const std::string& name,
                                 const std::string& field) {
  if (backend.HasImplementation(name)) return absl::OkStatus();
  std::vector<std::string> names;
  for (const v1::Implementation& impl : backend.Implementations()) names.push_back(impl.name());
  return absl::NotFoundError(absl::StrCat(field, ": ", Quote(name), " is not available on ",
                                          backend.name(), DidYouMean(name, names),
                                          " (available: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<ResolvedImplementation> ResolveImplementation(const ServiceState& state,
                                                             const Caller& caller,
                                                             const Backend& backend,
                                                             const std::string& name,
                                                             const std::string& field) {
  // Submission ids name code of the registry alone: one that is not the caller's is unknown
  // here, whatever a device holds under that name (another owner's, or a deleted one).
  const bool submission_id = IsSubmissionId(name);
  if (!submission_id && backend.HasImplementation(name)) {
    return ResolvedImplementation{name, std::nullopt};
  }
  if (state.find_submission) {
    absl::StatusOr<SubmittedKernel> found = state.find_submission(caller.owner, name);
    if (found.ok()) {
      RETURN_IF_ERROR(CheckSubmissions(backend.capabilities(), name, backend.name(), field));
      ResolvedImplementation r{found->submission.id(), std::move(*found)};
      r.submission->tenant = caller.owner;
      return r;
    }
    if (found.status().code() != absl::StatusCode::kNotFound) {
      return absl::Status(found.status().code(),
                          absl::StrCat(field, ": ", found.status().message()));
    }
  }
  if (submission_id) {
    return absl::NotFoundError(
        absl::StrCat(field, ": ", Quote(name), " is not a submission of this caller"));
  }
  return CheckImplementation(backend, name, field);
}

}  // namespace kerneleval::server
