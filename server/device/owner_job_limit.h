// What each owner may ask of a server's devices, checked before a job is queued, so that one
// owner cannot crowd the others out: how many of its jobs wait at once
// (--max-queued-per-owner: one owner cannot fill every device queue before another owner's
// single job is even accepted), and how many device-seconds its jobs held the devices in the
// last window (--owner-device-seconds-per-hour: one owner cannot keep every GPU busy for
// hours). Shared by every DeviceWorker of a server; thread-safe.
//
// Every job is charged to the owner it was queued under, built-ins included: the caller's
// identity (its token's owner, its certificate's subject, "anonymous" without
// authentication), whatever it runs. A job's charge is the time it held its device's worker,
// from the moment the worker took it to its end (queue time is free).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace kerneleval::server {

struct OwnerDeviceBudget {
  double seconds = 0;            // per window and owner; 0: no budget
  double window_seconds = 3600;  // sliding
};

class OwnerJobLimit {
 public:
  using Clock = std::chrono::steady_clock;

  explicit OwnerJobLimit(std::size_t max_per_owner, OwnerDeviceBudget budget = {})
      : max_(max_per_owner), budget_(budget) {}

  // Counts one more job of `owner`; RESOURCE_EXHAUSTED naming the owner (bounded) and the
  // flag when it already holds the limit, or when its jobs of the last window have used its
  // device-seconds (saying when enough of them leave the window for its next job). A limit
  // of 0 counts but never refuses.
  absl::Status Acquire(const std::string& owner);
  // The job has left the queue: a worker took it.
  void Release(const std::string& owner);
  // A job of `owner` held a device for `seconds`, ending now.
  void Charge(const std::string& owner, double seconds);
  std::size_t held(const std::string& owner) const;
  // Device-seconds `owner`'s jobs used in the window ending now.
  double used_seconds(const std::string& owner) const;

 private:
  struct Charged {
    Clock::time_point at;
    double seconds;
  };
  // Drops what left the window; the sum of what is left. Under mu_.
  double UsedLocked(const std::string& owner, Clock::time_point now) const;

  const std::size_t max_;
  const OwnerDeviceBudget budget_;
  mutable std::mutex mu_;
  std::map<std::string, std::size_t> held_;                     // no zero entries
  mutable std::map<std::string, std::deque<Charged>> charged_;  // oldest first, no empty ones
};

}  // namespace kerneleval::server
