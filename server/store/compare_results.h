// Stored results against each other, as Compare, Reproduce and regression detection ask:
// pooled samples of each side, the verdict of sample_statistics.h, each side's count and
// spread, and "not comparable" with what differs wherever the two sides measured different
// problems, protocols or device models (comparability.h).
//
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include "kerneleval/v1/results.pb.h"
#include "server/store/sample_statistics.h"

namespace kerneleval::server::store {

// The samples of each side's passing results, pooled (oldest first by convention), compared
// at significance `alpha` with the practical threshold `min_relative` (see CompareSamples).
// VERDICT_INCOMPARABLE, with `incomparable_reason`, when the setups differ (between the sides
// or within one side's pool), when a side has no passing result, or fewer than 3 samples.
v1::SampleComparison CompareStored(const std::vector<v1::StoredResult>& baseline,
                                   const std::vector<v1::StoredResult>& candidate, double alpha,
                                   double min_relative);

// A stored result against a fresh run of its receipt (Reproduce) on a device described by
// `environment`, with Compare's statistics and its default threshold.
v1::SampleComparison CompareResults(const v1::StoredResult& stored, const v1::WorkloadResult& fresh,
                                    const v1::Environment& environment, double alpha);

// Counts `comparison` into the response's totals by its verdict.
void Tally(const v1::SampleComparison& comparison, v1::CompareResponse* response);

Change ChangeOf(v1::Verdict verdict);
// "same", "faster", "slower", "inconclusive", "incomparable", "noisy": the regressions table's
// words.
const char* ChangeName(Change change);

}  // namespace kerneleval::server::store
