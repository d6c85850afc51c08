#include "server/device/owner_job_limit.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bounded_text.h"

namespace kerneleval::server {
namespace {

std::chrono::duration<double> Seconds(double s) { return std::chrono::duration<double>(s); }

}  // namespace

absl::Status OwnerJobLimit::Acquire(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t& held = held_[owner];
  if (max_ > 0 && held >= max_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("owner ", Quote(owner), " already has ", held,
                     " jobs waiting on this server's devices (--max-queued-per-owner ", max_,
                     "); retry when one has started"));
  }
  if (budget_.seconds > 0) {
    const Clock::time_point now = Clock::now();
    const double used = UsedLocked(owner, now);
    if (used >= budget_.seconds) {
      // Enough of the oldest charges leave the window to bring the owner under its budget.
      double left = used;
      double frees_in = 0;
      for (const Charged& c : charged_[owner]) {
        left -= c.seconds;
        frees_in =
            std::chrono::duration<double>(c.at + Seconds(budget_.window_seconds) - now).count();
        if (left < budget_.seconds) break;
      }
      if (held == 0) held_.erase(owner);
      return absl::ResourceExhaustedError(absl::StrFormat(
          "owner %s has used %.3f device-seconds in the last %.0f s, its budget "
          "(--owner-device-seconds-per-hour %g); its next job is accepted in %.0f s",
          Quote(owner), used, budget_.window_seconds, budget_.seconds, std::ceil(frees_in)));
    }
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

void OwnerJobLimit::Charge(const std::string& owner, double seconds) {
  if (budget_.seconds <= 0 || !(seconds > 0)) return;  // nothing to bound, or nothing held
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  UsedLocked(owner, now);  // trims what left the window first
  charged_[owner].push_back({now, seconds});
}

std::size_t OwnerJobLimit::held(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(owner);
  return it == held_.end() ? 0 : it->second;
}

double OwnerJobLimit::used_seconds(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  return UsedLocked(owner, Clock::now());
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

}  // namespace kerneleval::server
