// Whether work is taken and still wanted: the checks every front makes before it queues a
// job, and every job makes before it starts. Free of gRPC, so that any front can use them.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "server/core/service_state.h"
#include "server/device/backend.h"
#include "server/identity/caller_identity.h"

namespace kerneleval::server {

// The caller as a job sees it: its deadline and whether it went away.
struct Caller {
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::function<bool()> cancelled;      // may be empty: never cancelled
  std::string owner = kAnonymousOwner;  // whose submissions it may name

  bool DeadlinePassed() const { return deadline <= std::chrono::system_clock::now(); }
  bool Cancelled() const { return cancelled && cancelled(); }
};

// UNAVAILABLE while draining, or (with `needs_devices`) before every device has warmed up.
absl::Status Admit(const ServiceState& state, bool needs_devices);

// Work starts only while its caller still waits for it; `when` says where it stood ("before
// it was queued", "after 2.1 s in the queue of cpu"). The deadline is checked first: gRPC
// cancels a call whose deadline has passed too, and the deadline is the cause to report.
absl::Status StillWanted(const Caller& caller, const std::string& when);
std::string InQueueOf(const Backend& backend, double queue_seconds);

// A timer the device has: the host clock for CPUs, CUPTI or CUDA events for GPUs.
// INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckTimerFits(v1::Timer timer, const Backend& backend, const char* field);

// `name` is one of the device's implementations: NOT_FOUND naming `field` and listing the
// available ones otherwise.
absl::Status CheckImplementation(const Backend& backend, const std::string& name,
                                 const std::string& field);

// What an implementation name of a request resolves to on a device: a built-in, or the
// caller's registered submission (by name or id), which the job loads before measuring.
struct ResolvedImplementation {
  std::string name;  // the backend's name for it: the built-in's, or the submission's id
  std::optional<SubmittedKernel> submission;
};
absl::StatusOr<ResolvedImplementation> ResolveImplementation(const ServiceState& state,
                                                             const Caller& caller,
                                                             const Backend& backend,
                                                             const std::string& name,
                                                             const std::string& field);

}  // namespace kerneleval::server
