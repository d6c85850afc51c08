#include "server/figures/kernel_breakdown.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kerneleval::server {
namespace {

// Two-kernel calls, times in ns, values worked by hand.
std::vector<TimedKernel> TwoKernelCall(std::uint64_t at, std::uint64_t first_ns,
                                       std::uint64_t gap_ns, std::uint64_t second_ns) {
  return {{at, at + first_ns, "add"},
          {at + first_ns + gap_ns, at + first_ns + gap_ns + second_ns, "norm"}};
}

TEST(SummarizeKernels, SplitsATwoKernelCallIntoKernelsAndTheGapBetween) {
  const std::vector<std::vector<TimedKernel>> windows = {
      TwoKernelCall(1000, 2000, 500, 1500),
      TwoKernelCall(9000, 2100, 700, 1500),
      TwoKernelCall(20000, 1900, 600, 1600),
  };
  const std::vector<v1::KernelTiming> k = SummarizeKernels(windows, 1);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].index(), 0u);
  EXPECT_EQ(k[0].name(), "add");
  EXPECT_EQ(k[0].duration().samples(), 3u);
  EXPECT_NEAR(k[0].duration().median_seconds(), 2000e-9, 1e-15);
  EXPECT_NEAR(k[0].duration().min_seconds(), 1900e-9, 1e-15);
  EXPECT_FALSE(k[0].has_gap_before());  // the first kernel has no kernel before it
  EXPECT_EQ(k[1].index(), 1u);
  EXPECT_EQ(k[1].name(), "norm");
  EXPECT_NEAR(k[1].duration().median_seconds(), 1500e-9, 1e-15);
  EXPECT_NEAR(k[1].duration().max_seconds(), 1600e-9, 1e-15);
  EXPECT_EQ(k[1].gap_before().samples(), 3u);
  EXPECT_NEAR(k[1].gap_before().median_seconds(), 600e-9, 1e-15);
  EXPECT_NEAR(k[1].gap_before().mean_seconds(), 600e-9, 1e-15);
}

TEST(SummarizeKernels, OverlappingKernelsGiveANegativeGap) {
  // Programmatic dependent launch: the second kernel starts 300 ns before the first ends.
  const std::vector<std::vector<TimedKernel>> windows = {
      {{0, 1000, "a"}, {700, 2000, "b"}},
  };
  const std::vector<v1::KernelTiming> k = SummarizeKernels(windows, 1);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_NEAR(k[1].gap_before().median_seconds(), -300e-9, 1e-15);
  EXPECT_NEAR(k[1].duration().median_seconds(), 1300e-9, 1e-15);
}

TEST(SummarizeKernels, AGraphWindowIsSplitIntoItsCalls) {
  // Three calls of two kernels replayed in one window: six records, three values per place.
  std::vector<TimedKernel> w;
  for (std::uint64_t c = 0; c < 3; ++c) {
    for (const TimedKernel& k : TwoKernelCall(c * 10000, 1000 + c * 100, 200, 800)) w.push_back(k);
  }
  const std::vector<v1::KernelTiming> k = SummarizeKernels({w}, 3);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].duration().samples(), 3u);
  EXPECT_NEAR(k[0].duration().median_seconds(), 1100e-9, 1e-15);
  EXPECT_EQ(k[1].gap_before().samples(), 3u);
  EXPECT_NEAR(k[1].gap_before().max_seconds(), 200e-9, 1e-15);
  // The gap from one call's last kernel to the next call's first is no kernel's.
  EXPECT_FALSE(k[0].has_gap_before());
}

TEST(SummarizeKernels, WindowsThatDisagreeGiveNoBreakdown) {
  const std::vector<TimedKernel> two = TwoKernelCall(0, 100, 10, 100);
  const std::vector<TimedKernel> one = {{0, 100, "add"}};
  EXPECT_TRUE(SummarizeKernels({two, one}, 1).empty());  // different counts
  std::vector<TimedKernel> renamed = two;
  renamed[1].name = "other";
  EXPECT_TRUE(SummarizeKernels({two, renamed}, 1).empty());  // different kernels
  EXPECT_TRUE(SummarizeKernels({two}, 3).empty());           // 2 kernels, 3 calls
  EXPECT_TRUE(SummarizeKernels({}, 1).empty());
  EXPECT_TRUE(SummarizeKernels({{}}, 1).empty());
  EXPECT_TRUE(SummarizeKernels({two}, 0).empty());
}

TEST(SummarizeKernels, NamesKernelsDemangled) {
  // Records carry CUPTI's (mangled) name; the summary names each kernel once, demangled.
  const std::vector<std::vector<TimedKernel>> windows = {{{0, 100, "_Z3addPfi"}},
                                                         {{500, 610, "_Z3addPfi"}}};
  const std::vector<v1::KernelTiming> k = SummarizeKernels(windows, 1);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].name(), "add(float*, int)");
  EXPECT_NEAR(k[0].duration().max_seconds(), 110e-9, 1e-15);
}

TEST(KernelDisplayName, DemanglesAndBoundsTheName) {
  EXPECT_EQ(KernelDisplayName("_Z3addPfi"), "add(float*, int)");
  EXPECT_EQ(KernelDisplayName("fused_rows_vec16"), "fused_rows_vec16");  // extern "C"
  EXPECT_EQ(KernelDisplayName(nullptr), "");
  const std::string longest(1000, 'k');
  EXPECT_EQ(KernelDisplayName(longest.c_str()).size(), kMaxKernelNameChars);
}

}  // namespace
}  // namespace kerneleval::server
