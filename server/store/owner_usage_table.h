// Owners' device time in the results database (migration 0011), by the minute: what the
// per-owner device budget (server/device/owner_job_limit.h) reads and charges when servers
// share a database, so that the budget is one across them and survives restarts. Rows and SQL
// only; the budget's arithmetic stays in OwnerJobLimit.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/database.h"

namespace kerneleval::server::store {

class OwnerUsageTable {
 public:
  static constexpr std::int64_t kMinuteUs = 60'000'000;

  // One minute of an owner's charges.
  struct Minute {
    std::int64_t start_us = 0;  // Unix microseconds, a multiple of 60 s.
    std::int64_t device_us = 0;
  };

  // `db` must outlive the table (the ResultStore's database). `usable` is asked before each
  // statement: UNAVAILABLE while the store still waits for its database and its migrations.
  OwnerUsageTable(Database* db, std::function<absl::Status()> usable)
      : db_(db), usable_(std::move(usable)) {}

  // Adds `device_us` to `owner`'s minute of `at_us` (one upsert: servers charging the same
  // owner at once add up); the first charge of a minute also deletes the owner's minutes
  // older than a day.
  absl::Status Charge(const std::string& owner, std::int64_t device_us, std::int64_t at_us);
  // `owner`'s minutes that overlap (since_us, ...), oldest first.
  absl::StatusOr<std::vector<Minute>> MinutesSince(const std::string& owner, std::int64_t since_us);

 private:
  Database* db_;
  std::function<absl::Status()> usable_;
};

}  // namespace kerneleval::server::store
