#include "server/cuda/cuda_profile.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cuda/pc_sampling.h"
#include "server/cuda/range_profiler.h"
#include "server/cuda/sass_lines.h"
#include "server/figures/kernel_breakdown.h"
#include "server/figures/kernel_profile.h"
#include "server/figures/source_lines.h"

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

// Every replay of a profile: the protocol's preparation (an L2 flush when cold), then one
// call of input set 0, each waited for.
struct ProfiledCall {
  std::function<absl::Status()> prepare;
  std::function<absl::Status()> call;
};

ProfiledCall CallOf(const MeasureOptions& options, CudaDevice& device, CudaWorkspace* w) {
  cudaStream_t stream = w->stream;
  ProfiledCall c;
  c.prepare = [&options, &device, stream]() -> absl::Status {
    if (options.cold) RETURN_IF_ERROR(device.FlushL2());
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  c.call = [w, stream]() -> absl::Status {
    RETURN_IF_ERROR(w->Launch(0));
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  return c;
}

// Fills `symbols` with each kernel's symbol, in launch order, for the source lines.
absl::Status Profile(const MeasureOptions& options, CudaDevice& device, CudaWorkspace* w,
                     v1::ProfileReport* report, std::vector<std::string>* symbols) {
  const ProfiledCall profiled = CallOf(options, device, w);
  const auto& prepare = profiled.prepare;
  const auto& call = profiled.call;
  ASSIGN_OR_RETURN(const std::vector<TimedKernel> traced, TraceCall(device, prepare, call));
  for (const TimedKernel& k : traced) symbols->push_back(k.name);

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

// Each kernel's source lines, from PC samples of kSampledCalls calls mapped through the
// module's line table; unavailable with the reason where the module's table is not kept
// (the built-ins) or PC sampling cannot run.
void AddSourceLines(const MeasureOptions& options, CudaDevice& device, CudaWorkspace* w,
                    const std::vector<std::string>& symbols, v1::ProfileReport* report) {
  constexpr int kSampledCalls = 20;
  // A sample every 1024 cycles per SM: about 35 per SM in a 20 us call at 1.8 GHz.
  constexpr std::uint32_t kPeriodLog2 = 10;
  const auto unavailable = [report](const std::string& why) {
    for (v1::KernelProfile& k : *report->mutable_kernels()) {
      k.mutable_source_lines()->set_available(false);
      k.mutable_source_lines()->set_unavailable_reason(why);
    }
  };
  if (w->impl == nullptr || w->impl->cubin == nullptr) {
    unavailable(
        "source lines are shown for submissions, whose module image (and its line "
        "table) the service keeps; the built-ins are compiled into the server");
    return;
  }
  absl::StatusOr<CuptiLease> lease = CuptiLease::Acquire(CuptiLease::Kind::kProfiler);
  if (!lease.ok()) return unavailable(std::string(lease.status().message()));
  const ProfiledCall profiled = CallOf(options, device, w);
  absl::StatusOr<PcSamples> samples =
      SamplePcs(profiled.prepare, profiled.call, kSampledCalls, kPeriodLog2);
  if (!samples.ok()) return unavailable(std::string(samples.status().message()));
  SassLines lines(*w->impl->cubin);
  const std::uint64_t crc = lines.Crc();
  // A PC belongs to kernel i by its function's symbol; a call of one kernel takes every PC
  // of the module, should the two APIs spell a symbol differently.
  const bool one_kernel = report->kernels_size() == 1;
  for (int i = 0; i < report->kernels_size() && i < static_cast<int>(symbols.size()); ++i) {
    std::vector<SampledLine> pcs;
    for (const SampledPc& pc : samples->pcs) {
      if (crc != 0 && pc.cubin_crc != crc) continue;
      if (pc.function != symbols[i] && !one_kernel) continue;
      SampledLine line;
      const SourceLocation where = lines.Of(pc.function, pc.pc_offset);
      line.file = where.file;
      line.line = where.line;
      for (const auto& [cupti_name, n] : pc.reasons) {
        const std::string reason = PcSamplingReasonName(cupti_name);
        if (!reason.empty()) line.reasons.emplace_back(reason, n);
      }
      pcs.push_back(std::move(line));
    }
    v1::SourceLines* out = report->mutable_kernels(i)->mutable_source_lines();
    SumLines(pcs, out);
    out->set_available(out->samples() > 0);
    if (out->samples() == 0) {
      out->set_unavailable_reason(
          "no warp was sampled in this kernel: it is shorter than the "
          "sampling period on every SM");
    }
    out->set_calls(kSampledCalls);
    out->set_sampling_period_log2(kPeriodLog2);
    out->set_dropped_samples(samples->dropped);
  }
}

}  // namespace

v1::ProfileReport ProfileCall(const MeasureOptions& options, CudaDevice& device, CuptiLease* lease,
                              CudaWorkspace* w) {
  v1::ProfileReport report;
  lease->Release();
  *report.mutable_device() = DeviceLimits(device);
  std::vector<std::string> symbols;
  if (absl::Status s = Profile(options, device, w, &report, &symbols); !s.ok()) {
    report.clear_kernels();
    report.set_available(false);
    const std::string reason(s.message());
    report.set_unavailable_reason(absl::StrContains(reason, "unavailable")
                                      ? reason
                                      : absl::StrCat("profile unavailable: ", reason));
    return report;
  }
  report.set_available(true);
  AddSourceLines(options, device, w, symbols, &report);
  return report;
}

}  // namespace kerneleval::server
