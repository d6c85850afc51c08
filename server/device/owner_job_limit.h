// What each owner may ask of a server's devices, so that one owner cannot crowd the others
// out: how many of its jobs wait at once (--max-queued-per-owner: one owner cannot fill every
// device queue before another owner's single job is even accepted), and how many
// device-seconds its jobs held the devices in the last window (--owner-device-seconds-per-hour:
// one owner cannot keep every GPU busy for hours). Shared by every DeviceWorker of a server;
// thread-safe.
//
// Every job is charged to the owner it was queued under, built-ins included: the caller's
// identity (its token's owner, its certificate's subject, "anonymous" without
// authentication), whatever it runs and whichever front queued it. A job's charge is the time
// it held its device's worker, from the moment the worker took it to its end (queue time is
// free).
//
// The budget is checked twice: when a job is queued (a cheap early refusal) and again when a
// worker takes it (Start), counting the owner's jobs running then. The second check is the
// one that holds: jobs queued together all pass the first while nothing has been charged yet
// (a red team's 24 concurrent Runs against a 2 s budget once ran 6.9 device-seconds). A
// running job counts as it runs (its time so far), and for the start decision at least as
// much as the owner's longest job of the window (its reservation), so that jobs starting at
// once on several devices see each other. The bound: an owner's jobs of a window take at most
// its budget plus the one job that started under it (on one device exactly; across devices
// as far as its longest earlier job predicts the running ones).
//
// Servers that share a results database share the budget (set_shared_usage): every charge
// is also written there, by the minute, and Start (the check that holds; Acquire's early one
// stays local) reads the owner's charges of the window from there, every server's and those
// from before a restart; a minute leaves the
// window whole, up to a minute late. Other servers' running jobs are not seen, so across a
// fleet the bound is the budget plus one job per server. While the database cannot be read,
// the server's own charges count.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerneleval::server {

struct OwnerDeviceBudget {
  double seconds = 0;            // per window and owner; 0: no budget
  double window_seconds = 3600;  // sliding
};

// Device time charged by every server sharing a database (server/store/owner_usage_table.h),
// wired in by the server's assembly.
struct SharedOwnerUsage {
  struct Charged {
    std::int64_t by_unix_us = 0;  // the latest moment the charge can have been made
    double seconds = 0;
  };
  std::function<absl::Status(const std::string& owner, double seconds, std::int64_t at_unix_us)>
      charge;
  // The owner's charges made after `since_unix_us`, oldest first.
  std::function<absl::StatusOr<std::vector<Charged>>(const std::string& owner,
                                                     std::int64_t since_unix_us)>
      charged_since;
};

class OwnerJobLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // A job a worker has started (Start), until Finish.
  struct Running {
    std::string owner;
    std::uint64_t id = 0;
    Clock::time_point started;
  };

  explicit OwnerJobLimit(std::size_t max_per_owner, OwnerDeviceBudget budget = {})
      : max_(max_per_owner), budget_(budget) {}

  // Counts one more queued job of `owner`; RESOURCE_EXHAUSTED naming the owner (bounded) and
  // the flag when it already holds the limit, or when its budget is spent (BudgetLeft). A
  // limit of 0 counts but never refuses.
  absl::Status Acquire(const std::string& owner);
  // The job has left the queue: a worker took it.
  void Release(const std::string& owner);
  // A worker is about to run a job of `owner`: RESOURCE_EXHAUSTED naming the owner, what it
  // used, what its running jobs hold and the flag when its budget is spent counting them;
  // else the job counts as running until Finish.
  absl::StatusOr<Running> Start(const std::string& owner);
  // The job has ended: charged the time since Start, its reservation given back.
  void Finish(const Running& job);
  // A job of `owner` held a device for `seconds`, ending now.
  void Charge(const std::string& owner, double seconds);
  std::size_t held(const std::string& owner) const;
  // Device-seconds `owner`'s jobs used on this server in the window ending now, its running
  // jobs' time so far included.
  double used_seconds(const std::string& owner) const;
  // From now on, charges are also written to `usage` and the budget reads them from there.
  void set_shared_usage(SharedOwnerUsage usage);

 private:
  struct Charged {
    Clock::time_point at;
    double seconds;
  };
  // `owner`'s charges of the window ending at `now` as the shared usage has them, oldest
  // first; nullopt without shared usage or a budget, or when it cannot be read (logged).
  // Called without mu_: it may wait on the database.
  std::optional<std::deque<Charged>> SharedCharges(const std::string& owner,
                                                   Clock::time_point now) const;
  // OK while `owner` has budget left at `now`, counting what its running jobs hold (each at
  // least its reservation); the refusal otherwise. Charged time is this server's, or the
  // shared usage's (`shared`, when read) where that is more. Under mu_.
  absl::Status BudgetLeftLocked(const std::string& owner, Clock::time_point now,
                                const std::optional<std::deque<Charged>>& shared) const;
  // Drops what left the window; the sum of what is left. Under mu_.
  double UsedLocked(const std::string& owner, Clock::time_point now) const;
  // The owner's running jobs: their time so far (`reserved` false), or each at least its
  // reservation, the owner's longest charge of the window (`reserved` true). Under mu_.
  double RunningLocked(const std::string& owner, Clock::time_point now, bool reserved) const;

  const std::size_t max_;
  const OwnerDeviceBudget budget_;
  mutable std::mutex mu_;
  std::map<std::string, std::size_t> held_;                     // no zero entries
  mutable std::map<std::string, std::deque<Charged>> charged_;  // oldest first, no empty ones
  // Start times of running jobs, by owner and job id; no empty inner maps.
  std::map<std::string, std::map<std::uint64_t, Clock::time_point>> running_;
  std::uint64_t next_id_ = 1;
  SharedOwnerUsage shared_;  // empty functions: none
  // Whether the last read or write of the shared usage failed: a change is logged once.
  mutable std::atomic<bool> shared_failing_{false};
  void NoteShared(const absl::Status& status) const;
};

}  // namespace kerneleval::server
