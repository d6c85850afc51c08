// What a backend measured about its own measurement (clocks, the admission wait, DRAM bytes)
// copied into a result, with the checks a skeptic would make: DRAM traffic below what the
// definition must move, a median below the analytic floor, clocks held back while timing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// Clock-event reasons that do not slow a running kernel: GPU idle (0x1), the applications
// clocks setting (0x2) and the display clock setting (0x100).
inline constexpr std::uint64_t kNonThrottlingReasons = 0x1 | 0x2 | 0x100;

// Bytes the definition must read and write once per call (each declared tensor once).
struct DeclaredBytes {
  std::uint64_t read = 0;
  std::uint64_t write = 0;
};
DeclaredBytes DeclaredReadWrite(const Problem& problem);

// What the checks below found, by kind: the verdict reads these, never the position of a
// flag among the result's integrity_flags (which hold both kinds, for the reader).
struct IntegrityFindings {
  // The result is better than its bytes allow (DRAM or L2 traffic, the analytic floor): it
  // is rejected and never ranked.
  std::vector<std::string> too_good;
  // Worth reporting, no reason to reject (clocks held back while timing).
  std::vector<std::string> notes;

  bool rejects() const { return !too_good.empty(); }
};

// Fills result->measured_as / clocks / throttled / admission / dram / integrity_flags from
// `m` and `options`, and folds the clocks into env->clocks_during. `median_seconds` is the
// result's median; `device` gives the L2 size and the attribute peak. Integrity flags:
//  - counters read, L2 counted (any protocol): L2 reads below 95% of the declared reads, or
//    L2 writes below 95% of the declared writes (the work floor);
//  - cold, counters read: DRAM reads below 95% of the declared reads, or DRAM writes below
//    95% of the declared writes minus the L2 size (writes still dirty in L2 when the call
//    ends are written back after it: 20 MB of 66 MB at B = 16254 on an H200);
//  - the median below declared bytes / attribute peak, where the working set cannot be
//    served from L2 (cold, or larger than L2); cold, the writes that may stay dirty in L2
//    (up to its size) are left out of those bytes, as they are of the DRAM writes;
//  - a throttle reason other than kNonThrottlingReasons seen while timing.
// Returns the flags again, sorted into findings that reject and notes.
IntegrityFindings AnnotateMeasurement(const Measurement& m, const Problem& problem,
                                      const v1::Device& device, const MeasureOptions& options,
                                      double median_seconds, v1::WorkloadResult* result,
                                      v1::Environment* env);

// "cupti, cold", "cuda_events, hot, graph x50, rotate" (common/enum_names.h MeasuredAsName).
std::string MeasuredAs(v1::Timer timer, const MeasureOptions& options);

// Folds `part` into `total` (min of mins, max of maxes, sample-weighted mean, OR of masks).
void MergeClockSummary(const v1::ClockSummary& part, v1::ClockSummary* total);

}  // namespace kerneleval::server
