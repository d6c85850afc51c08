#include "server/figures/kernel_breakdown.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "server/figures/statistics.h"

namespace kerneleval::server {

std::vector<v1::KernelTiming> SummarizeKernels(const std::vector<std::vector<TimedKernel>>& windows,
                                               std::uint32_t calls_per_window) {
  if (windows.empty() || windows.front().empty() || calls_per_window == 0) return {};
  const std::vector<TimedKernel>& first = windows.front();
  if (first.size() % calls_per_window != 0) return {};
  const std::size_t per_call = first.size() / calls_per_window;
  for (const std::vector<TimedKernel>& w : windows) {
    if (w.size() != first.size()) return {};
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (w[i].name != first[i % per_call].name) return {};
    }
  }
  auto seconds = [](std::uint64_t from, std::uint64_t to) {
    // Signed: a kernel launched with PDL may start before the one ahead of it ends.
    return static_cast<double>(static_cast<std::int64_t>(to - from)) * 1e-9;
  };
  std::vector<v1::KernelTiming> out(per_call);
  for (std::size_t k = 0; k < per_call; ++k) {
    std::vector<double> durations, gaps;
    for (const std::vector<TimedKernel>& w : windows) {
      for (std::size_t c = 0; c < calls_per_window; ++c) {
        const std::size_t i = c * per_call + k;
        durations.push_back(seconds(w[i].start, w[i].end));
        if (k > 0) gaps.push_back(seconds(w[i - 1].end, w[i].start));
      }
    }
    v1::KernelTiming& t = out[k];
    t.set_index(static_cast<std::uint32_t>(k));
    t.set_name(KernelDisplayName(first[k].name.c_str()));
    ToProto(ComputeStats(std::move(durations)), t.mutable_duration());
    if (k > 0) ToProto(ComputeStats(std::move(gaps)), t.mutable_gap_before());
  }
  return out;
}

std::string KernelDisplayName(const char* mangled) {
  if (mangled == nullptr) return "";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string name = status == 0 && demangled != nullptr ? demangled.get() : mangled;
  if (name.size() > kMaxKernelNameChars) name.resize(kMaxKernelNameChars);
  return name;
}

}  // namespace kerneleval::server
