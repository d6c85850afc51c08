// CUPTI's range profiler (the CUDA 13 profiler host and target APIs) on the current
// context: metrics configured, work run in passes, each range evaluated. Two users: the
// DRAM count (a range per window the caller opens, all in one pass: server/cuda/dram_counters.h)
// and the kernel profile (a range per kernel, in as many passes as its metrics need:
// server/cuda/cuda_profile.h).
//
// The counters are device-wide: everything the device does inside a range counts, so the
// caller holds an attached kProfiler lease (server/cuda/cupti_timer.h), which keeps every
// other measurement of the process off the device meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct CUctx_st;
struct CUpti_Profiler_Host_Object;
struct CUpti_RangeProfiler_Object;

namespace kerneleval::server {

// The metrics of `candidates` that `chip` (CUPTI's chip name, e.g. "GH100") has, in order:
// the host API alone, no device needed. INVALID_ARGUMENT for a chip CUPTI does not know.
absl::StatusOr<std::vector<std::string>> MetricsOfChip(const std::string& chip,
                                                       const std::vector<std::string>& candidates);
// How many passes `metrics` need on `chip` when every counter is available (host API only).
absl::StatusOr<int> PassesOnChip(const std::string& chip, const std::vector<std::string>& metrics);

class RangeProfiler {
 public:
  // Ranges the caller pushes and pops around each window (one pass: the windows cannot be
  // replayed), or one range per kernel the work launches (passes repeated until every
  // counter was collected).
  enum class Ranges { kWindows, kKernels };

  RangeProfiler() = default;
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;
  ~RangeProfiler();

  // On `device` (the ordinal of the current device). UNAVAILABLE with "counters unavailable
  // on this machine: ..." where counters cannot be read (gVisor, no permission).
  absl::Status Open(int device);
  const std::string& chip() const { return chip_; }
  // Configures `metrics` (each valid for the chip) for up to `max_ranges` ranges; returns the
  // passes they need with this context's counter availability.
  absl::StatusOr<int> Configure(const std::vector<std::string>& metrics, int max_ranges);

  // kWindows: `max_ranges` windows in one pass, `prepare` before each outside its range.
  // kKernels: passes until all are submitted, `prepare` before each pass outside it, then
  // `window` once; every kernel `window` launches is a range. `passes` receives how many.
  absl::Status Collect(Ranges ranges, const std::function<absl::Status()>& prepare,
                       const std::function<absl::Status()>& window, int* passes = nullptr);
  // After Collect: the ranges collected, each one's name (a kernel's, mangled, for kKernels)
  // and the configured metrics' values in the order configured.
  std::size_t ranges() const { return ranges_; }
  // Whether CUPTI replayed each kernel itself (kKernels where the caller's replay of the
  // whole work was refused): then passes after the first did not follow `prepare`.
  bool kernel_replay() const { return kernel_replay_; }
  absl::StatusOr<std::string> RangeName(std::size_t range) const;
  absl::StatusOr<std::vector<double>> Evaluate(std::size_t range) const;

  // Forgets the context's availability image: after a failure the next profiler asks again.
  void ForgetAvailability();

 private:
  absl::Status Submit(Ranges ranges, const std::function<absl::Status()>& prepare,
                      const std::function<absl::Status()>& window, bool* all_submitted);

  bool initialized_ = false;
  int max_ranges_ = 1;
  bool kernel_replay_ = false;
  std::size_t ranges_ = 0;
  CUctx_st* ctx_ = nullptr;
  std::string chip_;
  std::vector<std::string> metric_names_;
  std::vector<const char*> metrics_;
  std::vector<std::uint8_t> availability_, config_, counter_data_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* range_ = nullptr;
};

}  // namespace kerneleval::server
