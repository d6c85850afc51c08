#include "server/rpc/owner_job_limit.h"

#include "absl/strings/str_cat.h"
#include "common/bounded_text.h"

namespace kerneleval::server {

absl::Status OwnerJobLimit::Acquire(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t& held = held_[owner];
  if (max_ > 0 && held >= max_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("owner ", Quote(owner), " already has ", held,
                     " jobs waiting on this server's devices (--max-queued-per-owner ", max_,
                     "); retry when one has started"));
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

std::size_t OwnerJobLimit::held(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(owner);
  return it == held_.end() ? 0 : it->second;
}

}  // namespace kerneleval::server
