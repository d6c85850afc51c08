#include "server/cuda/cuda_profile.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cuda/range_profiler.h"
#include "server/figures/kernel_breakdown.h"
#include "server/figures/kernel_profile.h"

namespace kerneleval::server {
namespace {

// FP32 lanes per SM by architecture, for the roofline's compute roof: 64 on sm_80 (A100),
// 128 on sm_86 and later (H100, H200, B200).
std::uint32_t Fp32LanesPerSm(int major, int minor) { return major == 8 && minor == 0 ? 64 : 128; }

v1::ProfileDevice DeviceLimits(const CudaDevice& device) {
  v1::ProfileDevice d;
  d.set_name(device.info().model());
  d.set_peak_dram_bytes_per_second(device.info().peak_bytes_per_second());
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device.ordinal()) != cudaSuccess) {
    cudaGetLastError();
    return d;
  }
  d.set_compute_major(static_cast<std::uint32_t>(p.major));
  d.set_compute_minor(static_cast<std::uint32_t>(p.minor));
  d.set_sm_count(static_cast<std::uint32_t>(p.multiProcessorCount));
  d.set_max_threads_per_sm(static_cast<std::uint32_t>(p.maxThreadsPerMultiProcessor));
  d.set_max_blocks_per_sm(static_cast<std::uint32_t>(p.maxBlocksPerMultiProcessor));
  d.set_registers_per_sm(static_cast<std::uint32_t>(p.regsPerMultiprocessor));
  d.set_registers_per_block(static_cast<std::uint32_t>(p.regsPerBlock));
  d.set_shared_bytes_per_sm(p.sharedMemPerMultiprocessor);
  d.set_shared_bytes_per_block(p.sharedMemPerBlock);
  d.set_shared_bytes_per_block_optin(p.sharedMemPerBlockOptin);
  d.set_reserved_shared_bytes_per_block(p.reservedSharedMemPerBlock);
  d.set_max_threads_per_block(static_cast<std::uint32_t>(p.maxThreadsPerBlock));
  d.set_warp_size(static_cast<std::uint32_t>(p.warpSize));
  d.set_fp32_lanes_per_sm(Fp32LanesPerSm(p.major, p.minor));
  int clock_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device.ordinal()) == cudaSuccess) {
    d.set_sm_clock_khz_max(static_cast<std::uint32_t>(clock_khz));
  }
  cudaGetLastError();
  return d;
}

v1::ProfiledLaunch LaunchOf(const TimedKernel& k) {
  v1::ProfiledLaunch l;
  for (std::uint32_t g : k.grid) l.add_grid(g);
  for (std::uint32_t b : k.block) l.add_block(b);
  l.set_cluster_size(k.cluster[0] * k.cluster[1] * k.cluster[2]);
  l.set_registers_per_thread(k.registers_per_thread);
  l.set_static_shared_bytes(k.static_shared_bytes);
  l.set_dynamic_shared_bytes(k.dynamic_shared_bytes);
  return l;
}

// The profile's metrics that `chip` has. Asked of CUPTI once per chip and process: the host
// API tries each metric on a host object of its own (about 0.2 s for GH100's 42).
absl::StatusOr<std::vector<std::string>> ProfileMetricsOf(const std::string& chip) {
  static std::mutex mu;
  static auto* known = new std::map<std::string, std::vector<std::string>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known->find(chip); it != known->end()) return it->second;
  ASSIGN_OR_RETURN(std::vector<std::string> metrics, MetricsOfChip(chip, ProfileMetrics()));
  return (*known)[chip] = std::move(metrics);
}

// The call's kernels as CUPTI traced them, in launch order: each one's name and launch.
absl::StatusOr<std::vector<TimedKernel>> TraceCall(CudaDevice& device,
                                                   const std::function<absl::Status()>& prepare,
                                                   const std::function<absl::Status()>& call) {
  ASSIGN_OR_RETURN(CuptiLease tracing, CuptiLease::Acquire(CuptiLease::Kind::kActivity));
  RETURN_IF_ERROR(prepare());
  std::vector<TimedKernel> kernels;
  absl::StatusOr<double> span =
      CuptiKernelTimer::TimeKernels(tracing, device.ordinal(), call, false, &kernels);
  if (!span.ok()) return span.status();
  return kernels;
}

absl::Status Profile(const MeasureOptions& options, CudaDevice& device, CudaWorkspace* w,
                     v1::ProfileReport* report) {
  cudaStream_t stream = w->stream;
  auto prepare = [&]() -> absl::Status {
    if (options.cold) RETURN_IF_ERROR(device.FlushL2());
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  auto call = [&]() -> absl::Status {
    RETURN_IF_ERROR(w->Launch(0));
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(const std::vector<TimedKernel> traced, TraceCall(device, prepare, call));

  ASSIGN_OR_RETURN(CuptiLease lease, CuptiLease::Acquire(CuptiLease::Kind::kProfiler));
  RangeProfiler profiler;
  absl::Status counted = [&]() -> absl::Status {
    RETURN_IF_ERROR(profiler.Open(device.ordinal()));
    report->mutable_device()->set_chip(profiler.chip());
    ASSIGN_OR_RETURN(const std::vector<std::string> metrics, ProfileMetricsOf(profiler.chip()));
    // A few ranges beyond the traced kernels, so that a call that launches more under the
    // profiler is seen for what it is rather than dropped.
    constexpr int kSpareRanges = 4;
    RETURN_IF_ERROR(
        profiler.Configure(metrics, static_cast<int>(traced.size()) + kSpareRanges).status());
    int passes = 0;
    RETURN_IF_ERROR(profiler.Collect(RangeProfiler::Ranges::kKernels, prepare, call, &passes));
    if (profiler.ranges() != traced.size()) {
      return absl::UnavailableError(absl::StrCat(
          "the call launched ", traced.size(), " kernels when traced and ", profiler.ranges(),
          " under the profiler: the kernels cannot be matched to their launches"));
    }
    for (std::size_t i = 0; i < traced.size(); ++i) {
      ASSIGN_OR_RETURN(const std::vector<double> values, profiler.Evaluate(i));
      v1::KernelProfile* k = report->add_kernels();
      k->set_index(static_cast<std::uint32_t>(i));
      k->set_name(KernelDisplayName(traced[i].name.c_str()));
      *k->mutable_launch() = LaunchOf(traced[i]);
      for (std::size_t m = 0; m < metrics.size(); ++m)
        (*k->mutable_counters())[metrics[m]] = values[m];
    }
    report->set_source(
        profiler.kernel_replay()
            ? absl::StrCat("CUPTI range profiler on ", profiler.chip(),
                           ": a range per kernel, each kernel replayed by CUPTI as its counters "
                           "need, its memory restored between replays",
                           options.cold ? ", the call after an L2 flush" : "",
                           "; the launches from one traced call")
            : absl::StrCat("CUPTI range profiler on ", profiler.chip(), ": a range per kernel, ",
                           passes, passes == 1 ? " replay" : " replays", " of one call",
                           options.cold ? ", each after an L2 flush"
                                        : ", caches as the previous replay left them",
                           "; the launches from one traced call"));
    return absl::OkStatus();
  }();
  if (!counted.ok()) profiler.ForgetAvailability();
  return counted;
}

}  // namespace

v1::ProfileReport ProfileCall(const MeasureOptions& options, CudaDevice& device, CuptiLease* lease,
                              CudaWorkspace* w) {
  v1::ProfileReport report;
  lease->Release();
  *report.mutable_device() = DeviceLimits(device);
  if (absl::Status s = Profile(options, device, w, &report); !s.ok()) {
    report.clear_kernels();
    report.set_available(false);
    const std::string reason(s.message());
    report.set_unavailable_reason(absl::StrContains(reason, "unavailable")
                                      ? reason
                                      : absl::StrCat("profile unavailable: ", reason));
    return report;
  }
  report.set_available(true);
  return report;
}

}  // namespace kerneleval::server
