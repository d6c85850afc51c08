// Warp PC sampling of the current context (CUPTI's PC Sampling API): while a call runs, each
// SM records, every 2^period cycles, the program counter of one of its warps and what that
// warp was doing (issuing, or the reason it stalled). Used by a profile's source lines
// (server/cuda/cuda_profile.h), after the counters and never inside a timed window; the
// caller holds a CuptiLease of kind kProfiler, since CUPTI serves one client at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kerneleval::server {

struct SampledPc {
  std::uint64_t cubin_crc = 0;  // The module, by CUPTI's CRC of its image.
  std::string function;         // The kernel's symbol.
  std::uint64_t pc_offset = 0;  // From the function's start.
  // Samples by reason, as CUPTI names them (smsp__pcsamp_warps_issue_stalled_...).
  std::vector<std::pair<std::string, std::uint64_t>> reasons;
};

struct PcSamples {
  std::vector<SampledPc> pcs;  // One entry per sampled PC of every kernel that ran.
  std::uint64_t total = 0;
  std::uint64_t dropped = 0;
  std::uint32_t period_log2 = 0;
};

// Samples the current context while `call` runs `calls` times (each `prepare`d first, with
// sampling paused), a sample every 2^period_log2 cycles (5 to 31). UNAVAILABLE with CUPTI's
// reason where PC sampling cannot run here (no device, not permitted, another CUPTI client).
absl::StatusOr<PcSamples> SamplePcs(const std::function<absl::Status()>& prepare,
                                    const std::function<absl::Status()>& call, int calls,
                                    std::uint32_t period_log2);

}  // namespace kerneleval::server
