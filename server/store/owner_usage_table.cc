#include "server/store/owner_usage_table.h"

#include "absl/strings/numbers.h"

namespace kerneleval::server::store {
namespace {

constexpr std::int64_t kMinuteUs = OwnerUsageTable::kMinuteUs;
constexpr std::int64_t kKeptUs = std::int64_t{24} * 3600 * 1'000'000;

std::int64_t MinuteOf(std::int64_t us) { return us - ((us % kMinuteUs) + kMinuteUs) % kMinuteUs; }

}  // namespace

absl::Status OwnerUsageTable::Charge(const std::string& owner, std::int64_t device_us,
                                     std::int64_t at_us) {
  if (device_us <= 0) return absl::OkStatus();
  if (absl::Status s = usable_(); !s.ok()) return s;
  auto added = db_->Query(
      "INSERT INTO owner_device_usage (owner, minute_us, device_us) VALUES ($1, $2, $3) "
      "ON CONFLICT (owner, minute_us) DO UPDATE SET device_us = owner_device_usage.device_us + "
      "excluded.device_us RETURNING device_us",
      {owner, MinuteOf(at_us), device_us});
  if (!added.ok()) return added.status();
  // The owner's old minutes go when a new minute's row is made (it holds this charge alone),
  // so once per owner and minute rather than with every charge.
  const bool new_minute =
      !added->empty() && !added->front().empty() && added->front()[0] == std::to_string(device_us);
  if (!new_minute) return absl::OkStatus();
  return db_
      ->Query("DELETE FROM owner_device_usage WHERE owner = $1 AND minute_us < $2",
              {owner, MinuteOf(at_us) - kKeptUs})
      .status();
}

absl::StatusOr<std::vector<OwnerUsageTable::Minute>> OwnerUsageTable::MinutesSince(
    const std::string& owner, std::int64_t since_us) {
  if (absl::Status s = usable_(); !s.ok()) return s;
  // A minute overlaps the window when it ends after its start.
  auto rows = db_->Query(
      "SELECT minute_us, device_us FROM owner_device_usage WHERE owner = $1 AND minute_us > $2 "
      "ORDER BY minute_us",
      {owner, since_us - kMinuteUs});
  if (!rows.ok()) return rows.status();
  std::vector<Minute> minutes;
  for (const SqlRow& row : *rows) {
    Minute m;
    if (row.size() < 2 || !row[0] || !row[1] || !absl::SimpleAtoi(*row[0], &m.start_us) ||
        !absl::SimpleAtoi(*row[1], &m.device_us)) {
      return absl::InternalError("owner_device_usage: a row that is not two integers");
    }
    minutes.push_back(m);
  }
  return minutes;
}

}  // namespace kerneleval::server::store
