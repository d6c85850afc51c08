// Kernel-only durations from CUPTI activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
// with CUPTI attached only while a measurement asks for it.
//
// An attached CUPTI perturbs every kernel of the process, traced or not: on an H200 a
// replayed CUDA graph of 1.4 us kernels ran 1.44 us per kernel before any CUPTI call, 1.70
// with tracing on, 1.46-1.80 with tracing off but CUPTI still attached, and 1.44 again after
// cuptiFinalize() (docs/results/measurement-h200.md). So CUPTI is attached for one measurement
// (CuptiLease) and finalized at its end; a measurement that does not use CUPTI runs as in a
// process that never loaded it.
//
// CUPTI is process-wide, so leases are exclusive: a lease that attaches CUPTI waits for every
// other measurement of the process to end, and measurements that do not attach share the
// device freely (CuptiLease::Shared). Windows of different devices are therefore serialized
// too: concurrent flushes were seen to lose records (H200 x2, both GPUs timing at once).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/figures/kernel_breakdown.h"

namespace kerneleval::server {

// A measurement's claim on CUPTI; move-only. The attached kind registers the activity
// callbacks (or only reserves CUPTI, for the range profiler) and, when destroyed, flushes
// and calls cuptiFinalize(). A graph exec that was replayed while tracing was on faults
// (Xid 31) if launched after cuptiFinalize(): destroy such graphs before the lease.
class CuptiLease {
 public:
  enum class Kind { kShared, kActivity, kProfiler };

  // kShared: no CUPTI; waits only for attached leases. kActivity / kProfiler: waits for
  // every other lease, then attaches. UNAVAILABLE when CUPTI cannot be used here.
  static absl::StatusOr<CuptiLease> Acquire(Kind kind);

  CuptiLease() = default;
  CuptiLease(CuptiLease&& o) noexcept;
  CuptiLease& operator=(CuptiLease&& o) noexcept;
  CuptiLease(const CuptiLease&) = delete;
  CuptiLease& operator=(const CuptiLease&) = delete;
  ~CuptiLease() { Release(); }

  Kind kind() const { return kind_; }
  bool attached() const { return kind_ != Kind::kShared && unique_.owns_lock(); }
  // Detaches CUPTI (if attached) and gives the lease up; idempotent.
  void Release();

 private:
  Kind kind_ = Kind::kShared;
  std::shared_lock<std::shared_mutex> shared_;
  std::unique_lock<std::shared_mutex> unique_;
};

class CuptiKernelTimer {
 public:
  // Probes CUPTI once per process (attach, enable kernel activity, finalize). Returns the
  // reason when CUPTI is unusable (library missing, profiling not permitted, disabled by
  // --disable-cupti: server/device/device_settings.h); callers then fall back to CUDA events.
  static absl::Status Initialize();
  static bool Available();
  // What Initialize() said, for reports.
  static std::string StatusText();

  // Runs `launch_and_sync` (which must synchronize its stream) inside a measurement window
  // and returns the span of the kernels it ran on `device` (the ordinal), in seconds. With
  // `skip_first`, the earliest kernel (a stream gate holding the rest until they are all
  // queued) is left out of the span. `kernels`, when given, receives the spanned kernels in
  // the order they started. The caller holds an attached lease.
  // FAILED_PRECONDITION if no kernel was recorded.
  static absl::StatusOr<double> TimeKernels(const CuptiLease& lease, int device,
                                            const std::function<absl::Status()>& launch_and_sync,
                                            bool skip_first = false,
                                            std::vector<TimedKernel>* kernels = nullptr);

 private:
  static void Begin(int device);
  static absl::StatusOr<double> End(int device, bool skip_first, std::vector<TimedKernel>* kernels);
};

}  // namespace kerneleval::server
