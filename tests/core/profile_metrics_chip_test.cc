// The metrics a profile asks for, checked against CUPTI's own tables for the chips the
// service runs on (the host API needs no device): a name CUPTI does not know would leave
// every profile on that chip without the figures it feeds.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "server/cuda/range_profiler.h"
#include "server/figures/kernel_profile.h"

namespace kerneleval::server {
namespace {

std::set<std::string> Known(const std::string& chip) {
  absl::StatusOr<std::vector<std::string>> known = MetricsOfChip(chip, ProfileMetrics());
  EXPECT_TRUE(known.ok()) << known.status();
  return known.ok() ? std::set<std::string>(known->begin(), known->end()) : std::set<std::string>{};
}

TEST(ProfileMetricsOnChips, HopperHasEveryOne) {
  const std::set<std::string> known = Known("GH100");
  for (const std::string& m : ProfileMetrics()) EXPECT_TRUE(known.count(m) > 0) << m;
  const absl::StatusOr<int> passes = PassesOnChip("GH100", ProfileMetrics());
  ASSERT_TRUE(passes.ok()) << passes.status();
  EXPECT_GT(*passes, 1);    // a profile replays its call
  EXPECT_LT(*passes, 256);  // within the replays Collect allows
}

TEST(ProfileMetricsOnChips, BlackwellHasEveryFigureButSomeStallReasons) {
  const std::set<std::string> known = Known("GB100");
  const std::string stall = "smsp__warps_issue_stalled_";
  for (const std::string& m : ProfileMetrics()) {
    if (m.rfind(stall, 0) == 0) continue;  // reasons differ by chip; missing ones are skipped
    EXPECT_TRUE(known.count(m) > 0) << m;
  }
  EXPECT_TRUE(known.count(stall + "long_scoreboard.sum") > 0);
}

TEST(ProfileMetricsOnChips, AnUnknownChipIsRefused) {
  const absl::StatusOr<std::vector<std::string>> none =
      MetricsOfChip("NOT_A_CHIP", {"dram__bytes_read.sum"});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kerneleval::server
