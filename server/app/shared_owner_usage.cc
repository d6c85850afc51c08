#include "server/app/shared_owner_usage.h"

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "server/store/owner_usage_table.h"

namespace kerneleval::server {

SharedOwnerUsage SharedOwnerUsageIn(const store::ResultStore& results) {
  auto table = std::make_shared<store::OwnerUsageTable>(results.database(),
                                                        [&results] { return results.Usable(); });
  SharedOwnerUsage usage;
  usage.charge = [table](const std::string& owner, double seconds, std::int64_t at_unix_us) {
    return table->Charge(owner, std::llround(seconds * 1e6), at_unix_us);
  };
  usage.charged_since = [table](const std::string& owner, std::int64_t since_unix_us)
      -> absl::StatusOr<std::vector<SharedOwnerUsage::Charged>> {
    auto minutes = table->MinutesSince(owner, since_unix_us);
    if (!minutes.ok()) return minutes.status();
    std::vector<SharedOwnerUsage::Charged> charged;
    charged.reserve(minutes->size());
    for (const store::OwnerUsageTable::Minute& m : *minutes) {
      // Charged at some moment of its minute: by its end at the latest.
      charged.push_back({m.start_us + store::OwnerUsageTable::kMinuteUs, m.device_us / 1e6});
    }
    return charged;
  };
  return usage;
}

}  // namespace kerneleval::server
