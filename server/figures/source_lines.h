// A kernel's warp samples by source line (v1::SourceLines): the PCs CUPTI sampled, each
// already mapped to its line, summed per line and per reason, and the advice they support.
// Pure: the device side samples and maps (server/cuda/pc_sampling.h, sass_lines.h); this
// sums, so that the figures are tested without a device.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

// One sampled PC of a kernel: its line (empty file where the line table has none) and its
// samples by reason ("selected", or a stall reason as WarpStall names it).
struct SampledLine {
  std::string file;
  std::uint32_t line = 0;
  std::vector<std::pair<std::string, std::uint64_t>> reasons;
};

inline constexpr int kMaxSourceLines = 12;
inline constexpr int kMaxLineReasons = 4;

// Sums the samples of each line: `out->lines` holds the kMaxSourceLines lines with the most
// samples (ties by file and line), each with its kMaxLineReasons most sampled reasons and its
// share of every sample of the kernel (those of PCs with no line included). Sets samples;
// leaves available, the reason, dropped samples, calls and period to the caller.
void SumLines(const std::vector<SampledLine>& pcs, v1::SourceLines* out);

// CUPTI's PC sampling names
// (smsp__pcsamp_warps_issue_stalled_long_scoreboard) as WarpStall names them
// (long_scoreboard); empty for the "_not_issued" counterparts, which count a subset of the
// same samples again.
std::string PcSamplingReasonName(const std::string& cupti_name);

// The advice a kernel's lines support: the line most of its long_scoreboard (global memory)
// samples wait at, where that line holds at least a fifth of the kernel's samples.
std::vector<v1::ProfileAdvice> AdviseLines(const v1::SourceLines& lines);

}  // namespace kerneleval::server
