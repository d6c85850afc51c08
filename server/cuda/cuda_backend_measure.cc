// CudaBackend::MeasureOnDevice: one measurement on the device, step by step. The steps live
// in files of their own: the inputs (cuda_input_buffers.h), the result call
// (cuda_result_call.h), the checks (cuda_call_checks_runner.h), the protocol's samples
// (cuda_measurement.h), the DRAM windows (cuda_dram_count.h).
#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cuda/clock_sampler.h"
#include "server/cuda/cuda_backend.h"
#include "server/cuda/cuda_call_checks_runner.h"
#include "server/cuda/cuda_dram_count.h"
#include "server/cuda/cuda_measurement.h"
#include "server/cuda/cuda_profile.h"
#include "server/cuda/cuda_result_call.h"
#include "server/cuda/cupti_timer.h"
#include "server/device/call_checks.h"
#include "server/device/sample_loop.h"
#include "server/figures/kernel_breakdown.h"

namespace kerneleval::server {
namespace {

// Before the first timed sample: submitted code starts the timed calls from fresh module
// state: nothing it counted or kept during the warm-up is left. A graph holds the old
// module's functions: it goes first and is built again (its first launch checked like any
// replay).
absl::Status StartTimedPhase(const MeasureOptions& options, CudaMeasurement* protocol,
                             CudaWorkspace* w) {
  if (!w->impl->reset) return absl::OkStatus();
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(w->stream));
  protocol->Drop();
  RETURN_IF_ERROR(w->impl->reset());
  return protocol->Build(options, w);
}

// One sample of the sample loop, with the checks of its calls around it.
absl::StatusOr<double> TimedCall(const MeasureOptions& options, v1::Timer timer,
                                 const CuptiLease& lease, CudaMeasurement* protocol,
                                 CudaWorkspace* w) {
  const std::uint32_t sample = w->samples++;
  if (sample == options.warmup && options.warmup > 0) {
    RETURN_IF_ERROR(StartTimedPhase(options, protocol, w));
  }
  if (w->Chained()) {
    CudaWorkspace::Checks& c = w->checks;
    // Hot without a graph: one call per sample, into the next free slot; a full batch is
    // checked first (between two samples, outside both windows).
    if (!options.graph && c.pending.size() == c.plan.batch_calls) {
      RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/true));
    }
    const std::size_t position = options.graph ? 0 : c.pending.size();
    ASSIGN_OR_RETURN(const double seconds, protocol->TimeSample(timer, lease, w, position));
    for (std::uint32_t k = 0; k < w->calls; ++k) c.pending.push_back({false, sample, k, w->calls});
    // A graph replay's calls are checked after its window, before the next one.
    if (options.graph) RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/true));
    return seconds;
  }
  const std::size_t set = w->next;
  w->next = (w->next + 1) % w->sets.size();
  const bool checked = w->checks.on && w->checks.plan.timing == CallCheckTiming::kEveryCall &&
                       w->checks.call < w->checks.plan.records;
  const std::uint64_t call = w->checks.call++;
  if (checked) {
    // Before the flush: inputs of this call alone (or, now and then, the previous call's
    // again), outputs poisoned, guards of fresh bytes.
    CudaWorkspace::Checks& c = w->checks;
    if (!RepeatsInputs(c.seed, call)) c.input_key = call;
    RETURN_IF_ERROR(WriteCheckedInputs(w, set, c.input_key, call));
  }
  ASSIGN_OR_RETURN(const double seconds, protocol->TimeSample(timer, lease, w, set));
  // After the stop point, before the next call's flush: nothing of it is timed, and the
  // flush restores the cache state it leaves.
  if (checked) RETURN_IF_ERROR(CheckCallOnDevice(w, set, w->checks.input_key, call, call));
  return seconds;
}

}  // namespace

absl::StatusOr<Measurement> CudaBackend::MeasureOnDevice(const Problem& problem,
                                                         const HostInputs& inputs,
                                                         const HostOutputs& outputs,
                                                         const CudaImplementation& impl,
                                                         const MeasureOptions& options) {
  ASSIGN_OR_RETURN(const v1::Timer timer, ResolveTimer(options));
  // CUPTI is attached for this measurement only when its timer is CUPTI.
  ASSIGN_OR_RETURN(CuptiLease lease,
                   CuptiLease::Acquire(timer == v1::TIMER_CUPTI ? CuptiLease::Kind::kActivity
                                                                : CuptiLease::Kind::kShared));
  // Declared after the lease (and the protocol, which may hold a graph on the workspace's
  // buffers, after the workspace): each goes before what it depends on.
  CudaWorkspace w;
  w.problem = &problem;
  w.impl = &impl;
  const std::unique_ptr<CudaMeasurement> protocol = MakeCudaMeasurement(options, &device_);
  // Each Measure (a verification round is one) starts from fresh module state.
  if (impl.reset) {
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(device_.stream()));
    RETURN_IF_ERROR(impl.reset());
  }
  // Run's time split: host-to-device is the inputs' preparation (allocation and the input
  // copies; from pageable memory the driver stages them before returning, from pinned memory
  // what is still in flight lands in device time); device-to-host is the copies back after
  // the result call's kernel has finished (RunResultCall); device time is the rest.
  const auto begun = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(buffers_.Prepare(problem, inputs, options, device_.info().l2_cache_bytes(),
                                   device_.stream(), &w));
  const auto prepared = std::chrono::steady_clock::now();

  // A Run's default (one hot call, no warm-up, events): the result call is the timed call,
  // as on the CPU, which saves a second launch and synchronisation on the latency path.
  const bool result_call_is_sample =
      !options.graph && !options.cold && !options.adaptive.enabled && options.warmup == 0 &&
      options.repetitions == 1 && timer == v1::TIMER_CUDA_EVENTS && !options.measure_dram_bytes &&
      !options.profile && !options.check_calls;
  double copy_back_seconds = 0;
  ASSIGN_OR_RETURN(const double first,
                   RunResultCall(device_, outputs, result_call_is_sample, &w, &copy_back_seconds));
  Measurement m;
  m.timer = timer;
  m.host_to_device_seconds = std::chrono::duration<double>(prepared - begun).count();
  m.device_to_host_seconds = copy_back_seconds;
  auto device_seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - prepared).count() -
           copy_back_seconds;
  };
  if (result_call_is_sample) {
    m.samples_seconds.push_back(first);
    m.device_seconds = device_seconds();
    return m;
  }
  RETURN_IF_ERROR(PrepareCheckedCalls(&w));
  RETURN_IF_ERROR(protocol->Build(options, &w));
  RETURN_IF_ERROR(device_.Admit(&m.admission));
  {
    ClockSampler sampler(device_.info().uuid(), ClockSamplePeriodMs());
    ASSIGN_OR_RETURN(Measurement timed, CollectSamples(options, [&] {
                       return TimedCall(options, timer, lease, protocol.get(), &w);
                     }));
    m.clocks = sampler.Stop();
    m.samples_seconds = std::move(timed.samples_seconds);
    m.stopped_early = timed.stopped_early;
  }
  // The timed samples are the last windows; the warm-up's go first.
  const std::size_t warmup_windows =
      w.kernel_windows.size() - std::min(w.kernel_windows.size(), m.samples_seconds.size());
  w.kernel_windows.erase(w.kernel_windows.begin(), w.kernel_windows.begin() + warmup_windows);
  m.kernels = SummarizeKernels(w.kernel_windows, w.calls);
  RETURN_IF_ERROR(FinishCheckedCalls(options, &w, &m));
  if (options.measure_dram_bytes && !m.stopped_early) {
    m.dram = CountDramBytes(options, device_, protocol.get(), &lease, &w);
  }
  if (options.profile && !m.stopped_early) {
    // A graph replayed under tracing goes before CUPTI changes hands (the DRAM count above
    // has dropped it already when it ran).
    protocol->Drop();
    m.profile = ProfileCall(options, device_, &lease, &w);
  }
  m.device_seconds = device_seconds();
  return m;
}

absl::StatusOr<v1::Timer> CudaBackend::ResolveTimer(const MeasureOptions& options) const {
  // CUPTI where it works (kernel-only), except in graph replay, where the protocol is the
  // peers' one (events around the replay, divided by the calls).
  v1::Timer timer = options.timer;
  if (timer == v1::TIMER_UNSPECIFIED) {
    timer =
        !options.graph && CuptiKernelTimer::Available() ? v1::TIMER_CUPTI : v1::TIMER_CUDA_EVENTS;
  }
  if (timer == v1::TIMER_CUPTI && !CuptiKernelTimer::Available()) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol.timer: TIMER_CUPTI requested but ", CuptiKernelTimer::StatusText()));
  }
  RETURN_IF_ERROR(CheckTimer(capabilities(), timer, name_, "protocol.timer"));
  return timer;
}

}  // namespace kerneleval::server
