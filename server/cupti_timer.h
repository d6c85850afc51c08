// Kernel-only durations from CUPTI activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).
//
// CUPTI's activity API is process-wide, so one collector serves every device; records are
// sorted into per-device lists by deviceId. Between Begin() and End() a device's worker
// launches the work to time and synchronizes; End() flushes CUPTI and returns the span from
// the first kernel start to the last kernel end on that device (launch overhead excluded,
// gaps between kernels included).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace kerneleval::server {

class CuptiKernelTimer {
 public:
  // Enables kernel activity collection once per process. Returns the reason when CUPTI is
  // unusable (library missing, profiling not permitted, ...); callers then fall back to
  // CUDA events.
  static absl::Status Initialize();
  static bool Available();
  // What Initialize() said, for reports.
  static std::string StatusText();

  // Runs `launch_and_sync` (which must synchronize its stream) inside a measurement window
  // and returns the span of the kernels it ran on `device` (the ordinal), in seconds.
  // Windows of different devices are serialized: CUPTI's flush is process-wide, and
  // concurrent flushes were seen to lose records (H200 x2, both GPUs timing at once).
  // FAILED_PRECONDITION if no kernel was recorded.
  static absl::StatusOr<double> TimeKernels(int device,
                                            const std::function<absl::Status()>& launch_and_sync,
                                            int* kernels = nullptr);

 private:
  static void Begin(int device);
  static absl::StatusOr<double> End(int device, int* kernels);
};

}  // namespace kerneleval::server
