#include "server/figures/statistics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kerneleval::server {
namespace {

// `sorted` is non-empty and ascending; q in [0, 1].
double Percentile(const std::vector<double>& sorted, double q) {
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

}  // namespace

SampleStats ComputeStats(std::vector<double> samples) {
  SampleStats stats;
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  stats.samples = static_cast<std::uint32_t>(samples.size());
  stats.min = samples.front();
  stats.max = samples.back();

  double sum = 0;
  for (double x : samples) sum += x;
  stats.mean = sum / n;
  // Two passes: the one-pass sum-of-squares formula cancels badly when the spread is tiny
  // relative to the mean, which is exactly the case for stable kernel timings.
  if (samples.size() > 1) {
    double squares = 0;
    for (double x : samples) squares += (x - stats.mean) * (x - stats.mean);
    stats.stddev = std::sqrt(squares / (n - 1));
  }
  stats.median = Percentile(samples, 0.5);
  stats.p90 = Percentile(samples, 0.9);
  stats.p99 = Percentile(samples, 0.99);
  stats.relative_spread = stats.mean != 0 ? stats.stddev / stats.mean : 0;
  return stats;
}

double GeometricMean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (double v : values) {
    if (!(v > 0)) return 0;
    log_sum += std::log(v);
  }
  return std::exp(log_sum / static_cast<double>(values.size()));
}

void ToProto(const SampleStats& stats, v1::LatencyStats* out) {
  out->set_samples(stats.samples);
  out->set_mean_seconds(stats.mean);
  out->set_median_seconds(stats.median);
  out->set_min_seconds(stats.min);
  out->set_max_seconds(stats.max);
  out->set_stddev_seconds(stats.stddev);
  out->set_p90_seconds(stats.p90);
  out->set_p99_seconds(stats.p99);
  out->set_relative_spread(stats.relative_spread);
}

}  // namespace kerneleval::server
