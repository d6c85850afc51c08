// A kernel's warp samples summed by source line (server/figures/source_lines.h): the order,
// the shares, the reasons kept, CUPTI's reason names, and the advice that names a line. The
// expected numbers are worked out here from the samples given.
#include "server/figures/source_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kerneleval::server {
namespace {

using ::testing::HasSubstr;

SampledLine Pc(const std::string& file, std::uint32_t line,
               std::vector<std::pair<std::string, std::uint64_t>> reasons) {
  SampledLine pc;
  pc.file = file;
  pc.line = line;
  pc.reasons = std::move(reasons);
  return pc;
}

TEST(SourceLines, PcsOfOneLineAreSummedMostSampledFirst) {
  const std::vector<SampledLine> pcs = {
      Pc("k.cu", 12, {{"long_scoreboard", 30}, {"selected", 10}}), Pc("k.cu", 7, {{"selected", 5}}),
      Pc("k.cu", 12, {{"long_scoreboard", 20}, {"wait", 2}}),
      Pc("", 0, {{"selected", 33}}),  // no line in the table: counted in the whole only
  };
  v1::SourceLines out;
  SumLines(pcs, &out);
  EXPECT_EQ(out.samples(), 100u);  // 40 + 5 + 22 + 33
  ASSERT_EQ(out.lines_size(), 2);
  EXPECT_EQ(out.lines(0).file(), "k.cu");
  EXPECT_EQ(out.lines(0).line(), 12u);
  EXPECT_EQ(out.lines(0).samples(), 62u);
  EXPECT_DOUBLE_EQ(out.lines(0).share_pct(), 62.0);
  ASSERT_EQ(out.lines(0).reasons_size(), 3);
  EXPECT_EQ(out.lines(0).reasons(0).reason(), "long_scoreboard");
  EXPECT_EQ(out.lines(0).reasons(0).samples(), 50u);
  EXPECT_EQ(out.lines(0).reasons(1).reason(), "selected");
  EXPECT_EQ(out.lines(0).reasons(2).reason(), "wait");
  EXPECT_EQ(out.lines(1).line(), 7u);
  EXPECT_DOUBLE_EQ(out.lines(1).share_pct(), 5.0);
}

TEST(SourceLines, AtMostTwelveLinesAndFourReasons) {
  std::vector<SampledLine> pcs;
  for (std::uint32_t line = 1; line <= 20; ++line) {
    pcs.push_back(
        Pc("k.cu", line, {{"a", line}, {"b", line}, {"c", line}, {"d", line}, {"e", line}}));
  }
  v1::SourceLines out;
  SumLines(pcs, &out);
  ASSERT_EQ(out.lines_size(), kMaxSourceLines);
  EXPECT_EQ(out.lines(0).line(), 20u);  // the most samples
  EXPECT_EQ(out.lines(kMaxSourceLines - 1).line(), 9u);
  EXPECT_EQ(out.lines(0).reasons_size(), kMaxLineReasons);
}

TEST(SourceLines, CuptiReasonNamesAsWarpStallNamesThem) {
  EXPECT_EQ(PcSamplingReasonName("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
            "long_scoreboard");
  EXPECT_EQ(PcSamplingReasonName("smsp__pcsamp_warps_issue_stalled_selected"), "selected");
  EXPECT_EQ(PcSamplingReasonName("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"),
            "");
  EXPECT_EQ(PcSamplingReasonName("smsp__pcsamp_sample_count"), "sample_count");
}

TEST(SourceLines, AdviceNamesTheLineWarpsWaitOnMemoryAt) {
  v1::SourceLines lines;
  SumLines({Pc("add_rmsnorm.py", 48, {{"long_scoreboard", 45}, {"selected", 5}}),
            Pc("add_rmsnorm.py", 44, {{"selected", 50}})},
           &lines);
  lines.set_available(true);
  std::vector<v1::ProfileAdvice> advice = AdviseLines(lines);
  ASSERT_EQ(advice.size(), 1u);
  EXPECT_EQ(advice[0].rule(), "waits_on_memory_at_line");
  EXPECT_THAT(advice[0].text(), HasSubstr("45% of the kernel's warp samples wait on global "
                                          "memory (long_scoreboard) at add_rmsnorm.py:48"));
  EXPECT_DOUBLE_EQ(advice[0].value(), 45.0);

  // Below a fifth of the samples, no line is named.
  SumLines({Pc("k.cu", 3, {{"long_scoreboard", 15}, {"selected", 85}})}, &lines);
  EXPECT_TRUE(AdviseLines(lines).empty());
  // Unavailable lines advise nothing.
  lines.set_available(false);
  EXPECT_TRUE(AdviseLines(lines).empty());
}

}  // namespace
}  // namespace kerneleval::server
