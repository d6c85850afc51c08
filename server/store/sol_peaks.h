// Which peak a stored result's SOL % is against, and whether two sets of results share one:
// SOL % against 9.29 GB/s and SOL % against 10.20 GB/s (a CPU's copy peak measured at two
// server starts) are not one scale, so the leaderboard ranks such runs by time and compare
// says the peaks differ.
//
// Pure functions except FillStoredPeaks; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kerneleval/v1/results.pb.h"
#include "server/store/database.h"

namespace kerneleval::server::store {

struct SolPeak {
  v1::PeakSource source = v1::PEAK_SOURCE_UNSPECIFIED;  // unspecified: the result has no SOL
  double bytes_per_second = 0;
};

// The peak of the figure tables show (PreferredSol).
SolPeak PeakOf(const v1::WorkloadResult& result);

// The same source and the same bytes per second to 1 part in 1e6 (the stored value
// round-trips exactly; a recomputed one may differ in its last bits).
bool SamePeak(const SolPeak& a, const SolPeak& b);

// "9.29 GB/s (measured_copy)".
std::string PeakText(const SolPeak& peak);

// "" when every result of both sides has one peak; else "SOL peaks differ: 9.29 GB/s vs
// 10.20 GB/s (measured_copy): compare times, not SOL %", baseline first. Results without a
// SOL figure are left out.
std::string PeakDifference(const std::vector<v1::StoredResult>& baseline,
                           const std::vector<v1::StoredResult>& candidate);

// Sets sol_peak_source / sol_peak_bytes_per_second of results stored before those columns
// (sol_peak_source -1, migration 0003) from their stored result_json.
absl::Status FillStoredPeaks(Database* db);

}  // namespace kerneleval::server::store
