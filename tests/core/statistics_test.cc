#include "server/figures/statistics.h"

#include <vector>

#include "gtest/gtest.h"

namespace kerneleval::server {
namespace {

TEST(ComputeStats, OneToTenMatchesHandComputedValues) {
  // Shuffled on purpose: the function sorts.
  const SampleStats s = ComputeStats({7, 3, 10, 1, 5, 9, 2, 8, 6, 4});
  EXPECT_EQ(s.samples, 10u);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  // sum((x - 5.5)^2) = 82.5 over n - 1 = 9.
  EXPECT_NEAR(s.stddev, 3.0276503540974917, 1e-12);
  // Rank 0.9 * 9 = 8.1: 9 + 0.1 * (10 - 9); rank 0.99 * 9 = 8.91.
  EXPECT_NEAR(s.p90, 9.1, 1e-12);
  EXPECT_NEAR(s.p99, 9.91, 1e-12);
  EXPECT_NEAR(s.relative_spread, 3.0276503540974917 / 5.5, 1e-12);
}

TEST(ComputeStats, EvenCountWithRepeatsMatchesNumpy) {
  // numpy: mean 5, std(ddof=1) 2.138089935299395, median 4.5, percentile 90 -> 7.6, 99 -> 8.86.
  const SampleStats s = ComputeStats({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_NEAR(s.stddev, 2.138089935299395, 1e-12);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_NEAR(s.p90, 7.6, 1e-12);
  EXPECT_NEAR(s.p99, 8.86, 1e-12);
}

TEST(ComputeStats, LatenciesInSeconds) {
  // Microsecond-scale samples with a tiny spread: the two-pass variance keeps its precision.
  const SampleStats s = ComputeStats({35e-6, 35.1e-6, 34.9e-6, 35e-6});
  EXPECT_NEAR(s.mean, 35e-6, 1e-15);
  EXPECT_NEAR(s.median, 35e-6, 1e-15);
  EXPECT_NEAR(s.stddev, 0.0816496580927726e-6, 1e-15);
}

TEST(ComputeStats, SingleSampleHasNoSpread) {
  const SampleStats s = ComputeStats({2.5});
  EXPECT_EQ(s.samples, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p99, 2.5);
  EXPECT_DOUBLE_EQ(s.stddev, 0);
  EXPECT_DOUBLE_EQ(s.relative_spread, 0);
}

TEST(ComputeStats, EmptyIsAllZero) {
  const SampleStats s = ComputeStats({});
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 0);
  EXPECT_EQ(s.stddev, 0);
  EXPECT_EQ(s.p90, 0);
  EXPECT_EQ(s.p99, 0);
  EXPECT_EQ(s.relative_spread, 0);
}

TEST(GeometricMean, KnownValues) {
  EXPECT_NEAR(GeometricMean({1, 4, 16}), 4, 1e-12);
  EXPECT_NEAR(GeometricMean({0.5}), 0.5, 1e-15);
}

TEST(GeometricMean, ZeroWhenEmptyOrAnyValueNotPositive) {
  EXPECT_EQ(GeometricMean({}), 0);
  EXPECT_EQ(GeometricMean({2, 0, 8}), 0);
  EXPECT_EQ(GeometricMean({2, -1}), 0);
}

TEST(ToProto, CopiesEveryField) {
  SampleStats s{3, 1, 2, 0.5, 4, 0.25, 3.5, 3.9, 0.25};
  v1::LatencyStats proto;
  ToProto(s, &proto);
  EXPECT_EQ(proto.samples(), 3u);
  EXPECT_EQ(proto.mean_seconds(), 1);
  EXPECT_EQ(proto.median_seconds(), 2);
  EXPECT_EQ(proto.min_seconds(), 0.5);
  EXPECT_EQ(proto.max_seconds(), 4);
  EXPECT_EQ(proto.stddev_seconds(), 0.25);
  EXPECT_EQ(proto.p90_seconds(), 3.5);
  EXPECT_EQ(proto.p99_seconds(), 3.9);
  EXPECT_EQ(proto.relative_spread(), 0.25);
}

}  // namespace
}  // namespace kerneleval::server
