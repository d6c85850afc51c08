// The devices a server serves: one DeviceWorker each, found by name or by load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/device/device_worker.h"

namespace kerneleval::server {

class DeviceSet {
 public:
  void Add(std::unique_ptr<DeviceWorker> worker) { workers_.push_back(std::move(worker)); }

  // By name; NOT_FOUND naming `field` and the devices that exist.
  absl::StatusOr<DeviceWorker*> Find(const std::string& name, const char* field) const;
  // Find() for new work: UNAVAILABLE while the device warms up, recovers from a fault or
  // has been given up on (work it had already accepted waits for it instead).
  absl::StatusOr<DeviceWorker*> FindHealthy(const std::string& name, const char* field) const;
  // The serving device with the fewest queued + running jobs (first on ties); `kind`
  // restricts to "cpu" or "cuda" when not empty.
  absl::StatusOr<DeviceWorker*> LeastLoaded(const std::string& kind = "") const;
  // Every device of the given kind.
  std::vector<DeviceWorker*> OfKind(const std::string& kind) const;

  const std::vector<std::unique_ptr<DeviceWorker>>& workers() const { return workers_; }
  std::string Names() const;

 private:
  std::vector<std::unique_ptr<DeviceWorker>> workers_;
};

}  // namespace kerneleval::server
