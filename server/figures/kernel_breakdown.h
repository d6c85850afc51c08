// Where a call's time goes, kernel by kernel: CUPTI's activity records of the timed windows
// summarized by each kernel's place in the call (WorkloadResult.kernels).
//
// Pure functions: no CUDA, no CUPTI, so that the summary is tested on any machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

// One kernel of a timed window, as CUPTI recorded it (nanoseconds on CUPTI's clock).
struct TimedKernel {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::string name;  // as CUPTI names it (mangled for C++ kernels)
  // How it was launched, from the same record (a profile's occupancy reads it).
  std::uint32_t grid[3] = {0, 0, 0};
  std::uint32_t block[3] = {0, 0, 0};
  std::uint32_t cluster[3] = {0, 0, 0};
  std::uint32_t registers_per_thread = 0;
  std::uint32_t static_shared_bytes = 0;
  std::uint32_t dynamic_shared_bytes = 0;
};

// `windows`: each timed window's kernels in the order they started; every window ran
// `calls_per_window` calls (graph replay: several). Kernel i of a window is kernel
// i % (kernels / calls_per_window) of its call. Empty when there is nothing to split or the
// windows disagree (different counts or kernels, or a count the calls do not divide): a
// breakdown by place means nothing there.
std::vector<v1::KernelTiming> SummarizeKernels(const std::vector<std::vector<TimedKernel>>& windows,
                                               std::uint32_t calls_per_window);

// `mangled` demangled where it is a C++ name (as is otherwise), cut to kMaxKernelNameChars.
constexpr std::size_t kMaxKernelNameChars = 256;
std::string KernelDisplayName(const char* mangled);

}  // namespace kerneleval::server
