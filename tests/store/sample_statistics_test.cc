// The comparison statistics against values published elsewhere: scipy's documentation of
// mannwhitneyu, and hand-computed rank sums.
#include "server/store/sample_statistics.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace kerneleval::server::store {
namespace {

// scipy.stats.mannwhitneyu documentation: males = [19, 22, 16, 29, 24] and
// females = [20, 11, 17, 12] give U1 = 17 and, exactly, p = 0.1111 (= 14 / 126).
TEST(MannWhitney, ExactMatchesScipyDocumentation) {
  const MannWhitney r = MannWhitneyU({19, 22, 16, 29, 24}, {20, 11, 17, 12});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 17);
  EXPECT_NEAR(r.p_value, 14.0 / 126.0, 1e-12);
}

// Eight or more values per side take the normal approximation; the same data repeated
// twice has ties inside each group, which the variance correction must count.
TEST(MannWhitney, AsymptoticWithTiesMatchesTheNormalApproximation) {
  std::vector<double> males, females;
  for (int k = 0; k < 2; ++k) {
    for (double v : {19, 22, 16, 29, 24}) males.push_back(v);
    for (double v : {20, 11, 17, 12}) females.push_back(v);
  }
  const MannWhitney r = MannWhitneyU(males, females);
  EXPECT_FALSE(r.exact);
  // Doubling each sample multiplies U by 4 (no value is shared between the groups).
  EXPECT_DOUBLE_EQ(r.u, 68);
  // n1 = 10, n2 = 8, ties of size 2 (9 groups): var = 80/12 * (19 - 9*6/(18*17)).
  const double var = 80.0 / 12 * (19 - 9 * 6.0 / (18 * 17));
  const double z = (68 - 40 - 0.5) / std::sqrt(var);
  EXPECT_NEAR(r.p_value, std::erfc(z / std::sqrt(2.0)), 1e-12);
}

TEST(MannWhitney, SymmetricAndBounded) {
  const MannWhitney a = MannWhitneyU({1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 6, 7, 8, 9, 10, 11, 12});
  const MannWhitney b = MannWhitneyU({5, 6, 7, 8, 9, 10, 11, 12}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_NEAR(a.p_value, b.p_value, 1e-15);
  EXPECT_DOUBLE_EQ(a.u + b.u, 9 * 8);
  EXPECT_DOUBLE_EQ(MannWhitneyU({1, 1, 1}, {1, 1, 1}).p_value, 1);
  EXPECT_DOUBLE_EQ(MannWhitneyU({}, {1}).p_value, 1);
}

TEST(Median, OddEvenEmpty) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
}

TEST(Quantiles, LinearInterpolationAsNumpy) {
  // numpy.quantile([1, 2, 3, 4], [0, 0.25, 0.5, 0.75, 1]) = [1, 1.75, 2.5, 3.25, 4].
  const std::vector<double> q = Quantiles({4, 2, 1, 3}, 5);
  ASSERT_EQ(q.size(), 5u);
  EXPECT_DOUBLE_EQ(q[0], 1);
  EXPECT_DOUBLE_EQ(q[1], 1.75);
  EXPECT_DOUBLE_EQ(q[2], 2.5);
  EXPECT_DOUBLE_EQ(q[3], 3.25);
  EXPECT_DOUBLE_EQ(q[4], 4);
}

std::vector<double> Noisy(std::mt19937_64* rng, int n, double median, double spread) {
  std::lognormal_distribution<double> d(std::log(median), spread);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(d(*rng));
  return v;
}

TEST(CompareSamples, FivePercentSlowdownIsSignificant) {
  std::mt19937_64 rng(1);
  const auto base = Noisy(&rng, 100, 10e-6, 0.02);
  const auto slow = Noisy(&rng, 100, 10.5e-6, 0.02);
  const SampleVerdict v = CompareSamples(base, slow, 0.05, 0.01);
  EXPECT_EQ(v.change, Change::kSlower);
  EXPECT_NEAR(v.ratio.ratio, 1.05, 0.01);
  EXPECT_LT(v.ratio.low, 1.05);
  EXPECT_GT(v.ratio.high, 1.05);
  EXPECT_GT(v.ratio.low, 1);
  EXPECT_LT(v.test.p_value, 1e-6);
  EXPECT_EQ(CompareSamples(slow, base, 0.05, 0.01).change, Change::kFaster);
}

TEST(CompareSamples, SameDistributionIsNeverCalledAChange) {
  // Twenty independent pairs from one distribution: at alpha 0.05 and with the CI also
  // required to clear the 1 % threshold, none is called faster or slower (a false call would
  // be a flaky comparison). 50 samples at 3 % spread cannot show that a change is below 1 %;
  // "same" is said only within the noise (an IQR of about 4 %), and says so in its threshold.
  std::mt19937_64 rng(7);
  int called = 0;
  for (int i = 0; i < 20; ++i) {
    const auto a = Noisy(&rng, 50, 10e-6, 0.03);
    const auto b = Noisy(&rng, 50, 10e-6, 0.03);
    const SampleVerdict v = CompareSamples(a, b, 0.05, 0.01);
    if (v.change == Change::kFaster || v.change == Change::kSlower) ++called;
    if (v.change == Change::kSame) {
      EXPECT_GT(v.threshold, 0.02);
      EXPECT_DOUBLE_EQ(v.threshold, v.noise);
    }
  }
  EXPECT_LE(called, 1);
  const auto a = Noisy(&rng, 50, 10e-6, 0.03);
  EXPECT_EQ(CompareSamples({1, 2}, a, 0.05, 0.01).change, Change::kIncomparable);
}

TEST(CompareSamples, SameOnlyWhereTheIntervalFitsInTheThreshold) {
  // 2000 samples a side at 2 % spread: the ratio's interval is about +-0.1 %, inside 1 %.
  std::mt19937_64 rng(11);
  const auto a = Noisy(&rng, 2000, 10e-6, 0.02);
  const auto b = Noisy(&rng, 2000, 10e-6, 0.02);
  const SampleVerdict v = CompareSamples(a, b, 0.05, 0.01);
  EXPECT_EQ(v.change, Change::kSame);
  EXPECT_GE(v.ratio.low, 0.99);
  EXPECT_LE(v.ratio.high, 1.01);
}

TEST(CompareSamples, AWideIntervalIsInconclusiveNotSame) {
  // Four samples a side, medians 21 % apart, overlapping: Mann-Whitney cannot reject (p > 0.05)
  // and the interval spans both 1 and 1.21. Calling that "same" hid a 21 % change.
  const std::vector<double> base = {10, 12, 9, 11.5};
  const std::vector<double> cand = {13.5, 14.5, 10.5, 12.5};
  const SampleVerdict v = CompareSamples(base, cand, 0.05, 0.01);
  EXPECT_NEAR(v.ratio.ratio, 13.0 / 10.75, 1e-12);
  EXPECT_GT(v.test.p_value, 0.05);
  EXPECT_EQ(v.change, Change::kInconclusive);
  // A real 21 % change measured well is called.
  std::mt19937_64 rng(5);
  EXPECT_EQ(
      CompareSamples(Noisy(&rng, 100, 10e-6, 0.02), Noisy(&rng, 100, 12.1e-6, 0.02), 0.05, 0.01)
          .change,
      Change::kSlower);
}

TEST(CompareSamples, AChangeWithinTheNoiseIsNoisyNotSlower) {
  // 2000 samples a side at 10 % spread (an IQR of about 13.5 % of the median): a 5 % shift is
  // significant and its interval lies beyond 1 %, but not beyond the noise: noisy. A 2x
  // slowdown at the same spread is slower.
  std::mt19937_64 rng(17);
  const auto a = Noisy(&rng, 2000, 10e-6, 0.10);
  const auto b = Noisy(&rng, 2000, 10.5e-6, 0.10);
  const SampleVerdict v = CompareSamples(a, b, 0.05, 0.01);
  EXPECT_LT(v.test.p_value, 1e-6);
  EXPECT_GT(v.ratio.low, 1.01);
  EXPECT_NEAR(v.noise, 2 * 0.6745 * 0.10, 0.02);
  EXPECT_DOUBLE_EQ(v.threshold, v.noise);
  EXPECT_EQ(v.change, Change::kNoisy);
  const SampleVerdict twice = CompareSamples(a, Noisy(&rng, 2000, 20e-6, 0.10), 0.05, 0.01);
  EXPECT_EQ(twice.change, Change::kSlower);
  // A quiet pair keeps the requested threshold.
  const SampleVerdict quiet =
      CompareSamples(Noisy(&rng, 200, 10e-6, 0.002), Noisy(&rng, 200, 10e-6, 0.002), 0.05, 0.01);
  EXPECT_DOUBLE_EQ(quiet.threshold, 0.01);
}

TEST(CompareSamples, SignificantButBelowTheThresholdIsNotAChange) {
  // A 0.5 % shift on 5000 samples at 1 % spread: p is tiny, but the interval lies inside
  // [0.99, 1.01]: same, whatever the p-value.
  std::mt19937_64 rng(13);
  const auto a = Noisy(&rng, 5000, 10e-6, 0.01);
  const auto b = Noisy(&rng, 5000, 10.05e-6, 0.01);
  const SampleVerdict v = CompareSamples(a, b, 0.05, 0.01);
  EXPECT_LT(v.test.p_value, 1e-6);
  EXPECT_EQ(v.change, Change::kSame);
}

TEST(Statistics, InterquartileRangeAsNumpy) {
  // numpy.percentile([1, 2, 3, 4], [25, 75]) = [1.75, 3.25].
  EXPECT_DOUBLE_EQ(InterquartileRange({4, 1, 3, 2}), 1.5);
  EXPECT_DOUBLE_EQ(InterquartileRange({7}), 0);
}

TEST(Bootstrap, DeterministicForASeed) {
  std::mt19937_64 rng(3);
  const auto a = Noisy(&rng, 40, 1, 0.1), b = Noisy(&rng, 40, 1.1, 0.1);
  const RatioInterval x = BootstrapRatioOfMedians(a, b, 0.95, 500, 9);
  const RatioInterval y = BootstrapRatioOfMedians(a, b, 0.95, 500, 9);
  EXPECT_DOUBLE_EQ(x.low, y.low);
  EXPECT_DOUBLE_EQ(x.high, y.high);
  EXPECT_LE(x.low, x.ratio);
  EXPECT_GE(x.high, x.ratio);
}

}  // namespace
}  // namespace kerneleval::server::store
