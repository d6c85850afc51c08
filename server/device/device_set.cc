#include "server/device/device_set.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"

namespace kerneleval::server {

std::string DeviceSet::Names() const {
  std::vector<std::string> names;
  for (const auto& w : workers_) names.push_back(w->name());
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<DeviceWorker*> DeviceSet::Find(const std::string& name, const char* field) const {
  for (const auto& w : workers_) {
    if (w->name() == name) return w.get();
  }
  return absl::NotFoundError(
      absl::StrCat(field, ": device ", Quote(name), " not found (available: ", Names(), ")"));
}

absl::StatusOr<DeviceWorker*> DeviceSet::FindHealthy(const std::string& name,
                                                     const char* field) const {
  absl::StatusOr<DeviceWorker*> found = Find(name, field);
  if (found.ok() && !(*found)->serving()) {
    const std::string reason = (*found)->NotServingReason();
    return absl::UnavailableError(absl::StrCat(field, ": device ", Quote(name), " ",
                                               reason.empty() ? "is not serving" : reason,
                                               "; retry shortly or choose another device"));
  }
  return found;
}

absl::StatusOr<DeviceWorker*> DeviceSet::LeastLoaded(const std::string& kind) const {
  DeviceWorker* best = nullptr;
  std::size_t best_load = 0;
  for (const auto& w : workers_) {
    if (!kind.empty() && w->backend().kind() != kind) continue;
    if (!w->serving()) continue;
    const std::size_t load = w->load();
    if (best == nullptr || load < best_load) {
      best = w.get();
      best_load = load;
    }
  }
  if (best == nullptr) {
    return absl::UnavailableError(
        "no healthy device: every device is warming up, recovering from a fault or out of "
        "service; retry when readiness is SERVING");
  }
  return best;
}

std::vector<DeviceWorker*> DeviceSet::OfKind(const std::string& kind) const {
  std::vector<DeviceWorker*> out;
  for (const auto& w : workers_) {
    if (w->backend().kind() == kind) out.push_back(w.get());
  }
  return out;
}

}  // namespace kerneleval::server
