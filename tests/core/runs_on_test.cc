// Which servers may claim a queued job: the runs_on grammar, what a server's devices let it
// claim, and the metric label without the node.
#include "server/queue/runs_on.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace kerneleval::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RunsOn, KindsArchitecturesAndNodes) {
  for (const char* text : {"cpu", "cuda", "cuda:sm_90", "cuda:sm_100", "cpu@node-7",
                           "cuda:sm_90@gpu-node-3.example"}) {
    absl::StatusOr<RunsOn> r = ParseRunsOn(text, "runs_on");
    ASSERT_TRUE(r.ok()) << text << ": " << r.status();
    EXPECT_EQ(r->Text(), text);
  }
  absl::StatusOr<RunsOn> r = ParseRunsOn("cuda:sm_100@n1", "runs_on");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, "cuda");
  EXPECT_EQ(r->arch, "sm_100");
  EXPECT_EQ(r->node, "n1");
}

TEST(RunsOn, WhatIsNotAKindIsRefusedByName) {
  for (const char* text : {"", "gpu", "cuda:", "cuda:90", "cuda:sm_9", "cuda:sm_9a0",
                           "cuda:sm_1000", "cpu:sm_90", "cuda@", "cuda@a b", "CUDA"}) {
    absl::StatusOr<RunsOn> r = ParseRunsOn(text, "runs_on");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("runs_on: '")) << text;
  }
  // A long value is quoted bounded.
  const std::string huge(10000, 'x');
  absl::StatusOr<RunsOn> r = ParseRunsOn(huge, "runs_on");
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 400u);
}

TEST(RunsOn, AServerClaimsItsKindsItsArchitecturesAndBothOnItsNode) {
  EXPECT_THAT(ClaimableKinds({{"cuda", "9.0"}, {"cuda", "9.0"}, {"cpu", ""}}, ""),
              ElementsAre("cpu", "cuda", "cuda:sm_90"));
  EXPECT_THAT(ClaimableKinds({{"cuda", "10.0"}}, "b200-1"),
              ElementsAre("cuda", "cuda:sm_100", "cuda:sm_100@b200-1", "cuda@b200-1"));
  // A GPU whose capability it cannot read is still a GPU.
  EXPECT_THAT(ClaimableKinds({{"cuda", ""}}, ""), ElementsAre("cuda"));
  EXPECT_EQ(ArchOfCapability("12.0"), "sm_120");
  EXPECT_EQ(ArchOfCapability("9"), "");
}

TEST(RunsOn, MetricLabelsLeaveTheNodeOut) {
  EXPECT_EQ(KindLabel("cuda:sm_90@gpu-node-3"), "cuda:sm_90");
  EXPECT_EQ(KindLabel("cpu"), "cpu");
}

}  // namespace
}  // namespace kerneleval::server
