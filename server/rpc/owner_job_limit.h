// How many jobs each owner may have waiting in a server's device queues at once
// (--max-queued-per-owner), so that one owner cannot fill every device queue before another
// owner's single job is even accepted. Shared by every DeviceWorker of a server.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace kerneleval::server {

class OwnerJobLimit {
 public:
  explicit OwnerJobLimit(std::size_t max_per_owner) : max_(max_per_owner) {}

  // Counts one more job of `owner`; RESOURCE_EXHAUSTED naming the owner (bounded) and the
  // flag when it already holds the limit. A limit of 0 counts but never refuses.
  absl::Status Acquire(const std::string& owner);
  // The job has left the queue: a worker took it.
  void Release(const std::string& owner);
  std::size_t held(const std::string& owner) const;

 private:
  const std::size_t max_;
  mutable std::mutex mu_;
  std::map<std::string, std::size_t> held_;  // no zero entries
};

}  // namespace kerneleval::server
