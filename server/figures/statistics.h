// Summary statistics of latency samples.
//
// Pure functions: no state, no threads, safe to call from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

// Summary of a set of samples, in the samples' unit (seconds for latencies).
struct SampleStats {
  std::uint32_t samples = 0;
  double mean = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double stddev = 0;  // Sample standard deviation (n - 1 in the denominator); 0 for n < 2.
  double p90 = 0;
  double p99 = 0;
  double relative_spread = 0;  // stddev / mean; 0 when mean is 0.
};

// Percentiles (median, p90, p99) interpolate linearly between the closest ranks, as numpy's
// default `percentile(..., method="linear")`: rank h = (n - 1) * q, value
// x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]) over the sorted samples.
// An empty input gives all zeros. Samples must be finite. Takes the vector by value because it
// sorts it.
SampleStats ComputeStats(std::vector<double> samples);

// exp(mean(log(x))). 0 when `values` is empty or any value is <= 0 (or NaN), since the
// geometric mean is undefined there and 0 reads as "no figure" in reports.
double GeometricMean(const std::vector<double>& values);

// Copies `stats` (seconds) into `out`, overwriting every field.
void ToProto(const SampleStats& stats, v1::LatencyStats* out);

}  // namespace kerneleval::server
