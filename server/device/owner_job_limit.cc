#include "server/device/owner_job_limit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/bounded_text.h"
#include "common/log.h"

namespace kerneleval::server {
namespace {

std::chrono::duration<double> Seconds(double s) { return std::chrono::duration<double>(s); }

template <typename From, typename To>
double SecondsBetween(From from, To to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

absl::Status OwnerJobLimit::Acquire(const std::string& owner) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t& held = held_[owner];
  if (max_ > 0 && held >= max_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("owner ", Quote(owner), " already has ", held,
                     " jobs waiting on this server's devices (--max-queued-per-owner ", max_,
                     "); retry when one has started"));
  }
  // Early, before the job waits in a queue, on this server's charges alone (no database read
  // on the RPC's path); Start checks again, with the shared usage, when it would run.
  if (absl::Status s = BudgetLeftLocked(owner, now, std::nullopt); !s.ok()) {
    if (held == 0) held_.erase(owner);
    return s;
  }
  ++held;
  return absl::OkStatus();
}

void OwnerJobLimit::Release(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(owner);
  if (it == held_.end()) return;
  if (--it->second == 0) held_.erase(it);
}

absl::StatusOr<OwnerJobLimit::Running> OwnerJobLimit::Start(const std::string& owner) {
  const Clock::time_point now = Clock::now();
  const std::optional<std::deque<Charged>> shared = SharedCharges(owner, now);
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = BudgetLeftLocked(owner, now, shared); !s.ok()) return s;
  Running job{owner, next_id_++, now};
  if (budget_.seconds > 0) running_[owner][job.id] = now;
  return job;
}

void OwnerJobLimit::Finish(const Running& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(job.owner);
    if (it != running_.end()) {
      it->second.erase(job.id);
      if (it->second.empty()) running_.erase(it);
    }
  }
  Charge(job.owner, SecondsBetween(job.started, Clock::now()));
}

void OwnerJobLimit::Charge(const std::string& owner, double seconds) {
  if (budget_.seconds <= 0 || !(seconds > 0)) return;  // nothing to bound, or nothing held
  decltype(shared_.charge) write_shared;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    UsedLocked(owner, now);  // trims what left the window first
    charged_[owner].push_back({now, seconds});
    write_shared = shared_.charge;
  }
  if (write_shared) NoteShared(write_shared(owner, seconds, absl::ToUnixMicros(absl::Now())));
}

void OwnerJobLimit::set_shared_usage(SharedOwnerUsage usage) {
  std::lock_guard<std::mutex> lock(mu_);
  shared_ = std::move(usage);
}

void OwnerJobLimit::NoteShared(const absl::Status& status) const {
  const bool failing = !status.ok();
  if (shared_failing_.exchange(failing) == failing) return;  // logged when it changes
  if (failing) {
    LogWarning(
        absl::StrCat("owner device budgets: the shared usage in the results database "
                     "cannot be read or written (each server counts its own meanwhile): ",
                     status.ToString()));
  } else {
    LogInfo("owner device budgets: the shared usage in the results database is back");
  }
}

std::optional<std::deque<OwnerJobLimit::Charged>> OwnerJobLimit::SharedCharges(
    const std::string& owner, Clock::time_point now) const {
  if (budget_.seconds <= 0) return std::nullopt;
  decltype(shared_.charged_since) read;
  {
    std::lock_guard<std::mutex> lock(mu_);
    read = shared_.charged_since;
  }
  if (!read) return std::nullopt;
  const std::int64_t now_us = absl::ToUnixMicros(absl::Now());
  auto charged = read(owner, now_us - static_cast<std::int64_t>(budget_.window_seconds * 1e6));
  NoteShared(charged.status());
  if (!charged.ok()) return std::nullopt;
  std::deque<Charged> out;
  for (const SharedOwnerUsage::Charged& c : *charged) {
    // On this server's steady clock; a charge of the current minute lies ahead of `now`.
    out.push_back({now + std::chrono::microseconds(c.by_unix_us - now_us), c.seconds});
  }
  return out;
}

std::size_t OwnerJobLimit::held(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(owner);
  return it == held_.end() ? 0 : it->second;
}

double OwnerJobLimit::used_seconds(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  return UsedLocked(owner, now) + RunningLocked(owner, now, /*reserved=*/false);
}

absl::Status OwnerJobLimit::BudgetLeftLocked(
    const std::string& owner, Clock::time_point now,
    const std::optional<std::deque<Charged>>& shared) const {
  if (budget_.seconds <= 0) return absl::OkStatus();
  const std::deque<Charged> none;
  const std::deque<Charged>* charges = &none;
  double charged = UsedLocked(owner, now);
  if (auto it = charged_.find(owner); it != charged_.end()) charges = &it->second;
  if (shared) {
    double in_shared = 0;
    for (const Charged& c : *shared) {
      if (now - c.at < Seconds(budget_.window_seconds)) in_shared += c.seconds;
    }
    // The shared usage holds this server's charges too, unless writing them failed.
    if (in_shared > charged) {
      charged = in_shared;
      charges = &*shared;
    }
  }
  const double running = RunningLocked(owner, now, /*reserved=*/true);
  if (charged + running < budget_.seconds) return absl::OkStatus();
  // When enough of the oldest charges have left the window to bring the owner under its
  // budget; the running jobs count as charged now.
  double left = charged + running;
  double frees_in = budget_.window_seconds;
  for (const Charged& c : *charges) {
    if (now - c.at >= Seconds(budget_.window_seconds)) continue;  // already out
    left -= c.seconds;
    if (left < budget_.seconds) {
      frees_in = SecondsBetween(now, c.at + Seconds(budget_.window_seconds));
      break;
    }
  }
  std::string held_by_running;
  if (auto it = running_.find(owner); it != running_.end()) {
    held_by_running = absl::StrFormat(" (%.3f of them held by its %d running jobs)", running,
                                      static_cast<int>(it->second.size()));
  }
  return absl::ResourceExhaustedError(
      absl::StrFormat("owner %s has used %.3f device-seconds in the last %.0f s%s%s, its "
                      "budget (--owner-device-seconds-per-hour %g); its next job is accepted in "
                      "%.0f s",
                      Quote(owner), charged + running, budget_.window_seconds,
                      shared ? " on the servers sharing the results database" : "", held_by_running,
                      budget_.seconds, std::ceil(std::max(0.0, frees_in))));
}

double OwnerJobLimit::UsedLocked(const std::string& owner, Clock::time_point now) const {
  auto it = charged_.find(owner);
  if (it == charged_.end()) return 0;
  std::deque<Charged>& q = it->second;
  while (!q.empty() && now - q.front().at >= Seconds(budget_.window_seconds)) q.pop_front();
  if (q.empty()) {
    charged_.erase(it);
    return 0;
  }
  double sum = 0;
  for (const Charged& c : q) sum += c.seconds;
  return sum;
}

double OwnerJobLimit::RunningLocked(const std::string& owner, Clock::time_point now,
                                    bool reserved) const {
  auto it = running_.find(owner);
  if (it == running_.end()) return 0;
  double longest = 0;  // what one more job of this owner is expected to take
  if (auto c = charged_.find(owner); reserved && c != charged_.end()) {
    for (const Charged& charge : c->second) longest = std::max(longest, charge.seconds);
  }
  double sum = 0;
  for (const auto& [id, started] : it->second) {
    sum += std::max(SecondsBetween(started, now), longest);
  }
  return sum;
}

}  // namespace kerneleval::server
