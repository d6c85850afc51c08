// Comparing two sets of timing samples the way nvbench_compare and kernelbot do: a
// Mann-Whitney U test (no assumption of normality: kernel latencies are skewed and
// multi-modal) and a bootstrap confidence interval of the ratio of medians, combined into a
// verdict. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace kerneleval::server::store {

struct MannWhitney {
  double u = 0;        // U of the first sample (scipy's `statistic`)
  double p_value = 1;  // two-sided
  bool exact = false;  // exact distribution (small samples without ties), else normal approx.
};

// scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="auto") semantics: exact
// when both samples have fewer than 8 values and there are no ties, else the normal
// approximation with the tie correction and a continuity correction. Empty input: p = 1.
MannWhitney MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y);

// Median (the mean of the two middle values for an even count); 0 for an empty vector.
double Median(std::vector<double> v);

struct RatioInterval {
  double ratio = 0;  // median(candidate) / median(baseline)
  double low = 0, high = 0;
};

// Percentile bootstrap of median(candidate) / median(baseline): `resamples` resamplings of
// each side with replacement, the (1 - confidence) / 2 tails cut. Deterministic for a seed.
RatioInterval BootstrapRatioOfMedians(const std::vector<double>& baseline,
                                      const std::vector<double>& candidate, double confidence,
                                      int resamples, std::uint64_t seed);

enum class Change { kSame, kFaster, kSlower, kInconclusive, kIncomparable, kNoisy };

// k of the noise-aware threshold: a change is called only beyond max(t, k x spread), where
// spread is the larger of the two sides' IQR / median. 1: a change must exceed the spread
// between a side's quartiles, which two back-to-back runs of one build on a busy machine do
// not (their medians moved by up to the IQR), while a planted 2x slowdown does by far.
inline constexpr double kNoiseMultiplier = 1.0;

struct SampleVerdict {
  MannWhitney test;
  RatioInterval ratio;
  Change change = Change::kIncomparable;
  double noise = 0;      // kNoiseMultiplier x the larger relative IQR
  double threshold = 0;  // the threshold used: max(min_relative_difference, noise)
};

// nvbench_compare's question, answered only where the data can answer it. With t =
// `min_relative_difference` (the smallest change worth a verdict):
//   kSlower / kFaster: p < alpha and the ratio's 95 % interval lies wholly above 1 + t
//                      (below 1 - t): a real change, and at least t;
//   kSame:             the interval lies within [1 - t, 1 + t]: any change is below t;
//   kNoisy:            p < alpha and the interval lies beyond 1 +- t but not beyond
//                      1 +- max(t, noise): a change the measured spread cannot support;
//   kInconclusive:     anything else (too few samples or too much spread to tell either).
// t is raised to max(t, noise) first for kSlower, kFaster and kSame (kNoiseMultiplier).
// Fewer than 3 samples a side: kIncomparable.
SampleVerdict CompareSamples(const std::vector<double>& baseline,
                             const std::vector<double>& candidate, double alpha,
                             double min_relative_difference);

// The interquartile range (75th minus 25th percentile, numpy's linear interpolation); 0 for
// fewer than 2 values.
double InterquartileRange(const std::vector<double>& v);

// `n_out` evenly spaced quantiles (linear interpolation, as numpy's default): what retention
// keeps of a run's samples once they are downsampled.
std::vector<double> Quantiles(std::vector<double> v, int n_out);

}  // namespace kerneleval::server::store
