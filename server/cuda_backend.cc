#include "server/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kerneleval/kernels/call_check_cuda.h"
#include "kerneleval/kernels/fault_injection_cuda.h"
#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"
#include "kerneleval/kernels/l2_flush_cuda.h"
#include "kerneleval/kernels/stream_gate_cuda.h"
#include "server/call_checks.h"
#include "server/clock_admission.h"
#include "server/clock_sampler.h"
#include "server/cupti_timer.h"
#include "server/dram_counters.h"
#include "server/kernel_breakdown.h"
#include "server/nvml.h"
#include "server/sample_loop.h"
#include "server/sol.h"

namespace kerneleval::server {
namespace {

// A gate the host fails to open lets the stream go after this long (device clock).
constexpr unsigned long long kGateTimeoutNs = 1'000'000'000ull;

std::string UuidString(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

// Errors after which the context is unusable until the device is reset.
bool IsStickyError(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

// The roles of KeptBuffers (server/kept_buffers.h): which tensor a kept buffer held.
enum BufferRole : int { kWeightRole, kXRole, kRRole, kOutRole, kResRole, kScratchRole };

// A rotation set's buffer: new for each measurement.
absl::Status Allocate(DeviceBuffer* b, std::size_t bytes) {
  ASSIGN_OR_RETURN(*b, DeviceBuffer::Allocate(bytes));
  return absl::OkStatus();
}

double Seconds(float ms) { return static_cast<double>(ms) * 1e-3; }

}  // namespace

std::vector<CudaImplementation> BuiltinCudaImplementations() {
  return {
      {"cuda_fused",
       "kerneleval's fused kernel: latency path for small batches, 16-byte streaming path for "
       "large ones",
       false,
       [](const FusedAddRmsNormArgs& a, void*, cudaStream_t s) {
         return LaunchFusedAddRmsNorm(a, s);
       }},
      {"cuda_unfused", "Two kernels (add, then RMSNorm) as eager PyTorch runs them", true,
       [](const FusedAddRmsNormArgs& a, void* scratch, cudaStream_t s) {
         return LaunchUnfusedAddRmsNorm(a, scratch, s);
       }},
  };
}

CudaImplementation FaultInjectionImplementation() {
  return {"fault_illegal_address",
          "Test only: faults with cudaErrorIllegalAddress to exercise device recovery", false,
          [](const FusedAddRmsNormArgs&, void*, cudaStream_t s) {
            return LaunchIllegalAddressFault(s);
          },
          /*test_only=*/true};
}

CudaImplementation LazyHalfRowsImplementation() {
  struct Seen {
    std::mutex mu;
    const void* output = nullptr;
    std::int64_t batch = 0, hidden = 0;
  };
  auto seen = std::make_shared<Seen>();
  return {"lazy_half_rows",
          "Test only: after its first call into an output buffer, computes only the first half "
          "of the rows (a cached-result reward hack that DRAM counters flag)",
          false,
          [seen](const FusedAddRmsNormArgs& a, void*, cudaStream_t s) {
            FusedAddRmsNormArgs lazy = a;
            {
              std::lock_guard<std::mutex> lock(seen->mu);
              const bool again =
                  seen->output == a.output && seen->batch == a.batch && seen->hidden == a.hidden;
              seen->output = a.output;
              seen->batch = a.batch;
              seen->hidden = a.hidden;
              if (again) lazy.batch = (a.batch + 1) / 2;
            }
            return LaunchFusedAddRmsNorm(lazy, s);
          },
          /*test_only=*/true};
}

int CudaBackend::DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear: no driver or no device is not an error here
    return 0;
  }
  return n;
}

CudaBackend::CudaBackend(int ordinal, std::vector<CudaImplementation> impls)
    : ordinal_(ordinal), name_(absl::StrCat("cuda:", ordinal)), impls_(std::move(impls)) {
  v1::Device& d = static_info_;
  d.set_name(name_);
  d.set_kind("cuda");
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal_) == cudaSuccess) {
    d.set_model(prop.name);
    d.set_uuid(UuidString(prop.uuid));
    d.set_sm_count(prop.multiProcessorCount);
    d.set_memory_bytes(prop.totalGlobalMem);
    // Every workload of the shipped suites together needs under 3 GB.
    kept_buffers_.set_budget_bytes(prop.totalGlobalMem / 8);
    d.set_l2_cache_bytes(static_cast<std::uint64_t>(prop.l2CacheSize));
    d.set_compute_capability(absl::StrCat(prop.major, ".", prop.minor));
  }
  // CUDA 13 removed cudaDeviceProp::memoryClockRate; the attribute is the supported path.
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal_);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal_);
  d.set_memory_clock_khz(clock_khz);
  d.set_memory_bus_width_bits(bus_bits);
  d.set_peak_bytes_per_second(AttributePeakBytesPerSecond(clock_khz, bus_bits));
  if (auto sheet = DatasheetPeakBytesPerSecond(d.model())) d.set_datasheet_bytes_per_second(*sheet);
  cudaGetLastError();
}

v1::Device CudaBackend::Describe() const {
  v1::Device d = static_info_;
  d.set_measured_copy_bytes_per_second(copy_bandwidth_.load());
  d.set_healthy(healthy_.load());
  return d;
}

std::vector<v1::Implementation> CudaBackend::Implementations() const {
  std::vector<CudaImplementation> listed;
  for (const CudaImplementation& impl : impls_) {
    if (!impl.submitted) listed.push_back(impl);
  }
  return DescribeImplementations(listed, "cuda");
}

std::string CudaBackend::DriverVersion() const {
  std::string v = Nvml::Get().DriverVersion();
  if (!v.empty()) return v;
  int d = 0;
  cudaDriverGetVersion(&d);
  return absl::StrCat("CUDA driver API ", d / 1000, ".", (d % 1000) / 10);
}

std::string CudaBackend::RuntimeVersion() const {
  int r = 0;
  cudaRuntimeGetVersion(&r);
  return absl::StrCat(r / 1000, ".", (r % 1000) / 10);
}

std::string CudaBackend::TimerStatus() const { return CuptiKernelTimer::StatusText(); }

v1::Clocks CudaBackend::ReadClocks(bool* available) {
  v1::Clocks c;
  *available = Nvml::Get().ReadClocks(static_info_.uuid(), &c);
  return c;
}

void CudaBackend::PinHostMemory(void* data, std::size_t bytes) {
  cudaSetDevice(ordinal_);
  const cudaError_t e = cudaHostRegister(data, bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: copies from pageable memory still work, only slower
    LogWarning(absl::StrCat(name_, ": cannot page-lock ", bytes, " bytes of host memory (",
                            cudaGetErrorString(e), "); copies go through staging"));
  }
}

void CudaBackend::UnpinHostMemory(void* data) {
  cudaSetDevice(ordinal_);
  if (cudaHostUnregister(data) != cudaSuccess) cudaGetLastError();
}

absl::Status CudaBackend::WarmUp() {
  KE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  KE_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the primary context now
  ASSIGN_OR_RETURN(stream_, CreateStream());
  ASSIGN_OR_RETURN(flush_, DeviceBuffer::Allocate(2 * static_info_.l2_cache_bytes()));
  ASSIGN_OR_RETURN(flush_sink_, DeviceBuffer::Allocate(sizeof(unsigned)));
  ASSIGN_OR_RETURN(gate_flag_, DeviceBuffer::Allocate(sizeof(int)));
  ASSIGN_OR_RETURN(gate_stream_, CreateStream());
  gate_generation_ = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gate_flag_.get(), 0, sizeof(int), stream_.get()));
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flush_.get(), 0, flush_.bytes(), stream_.get()));
  // Failure is reported in TimerStatus(), not fatal: CUDA events remain.
  CuptiKernelTimer::Initialize().IgnoreError();
  RETURN_IF_ERROR(MeasureCopyBandwidth());
  // Load every implementation's module once so the first request does not pay for it.
  const Problem p{DType::kBF16, Mode::kOutput, 1, 2048, 1e-6f};
  std::vector<unsigned char> host(p.TensorBytes(), 0), w(p.WeightBytes(), 0);
  for (const CudaImplementation& impl : impls_) {
    if (impl.test_only) continue;
    MeasureOptions o;
    o.warmup = 0;
    o.repetitions = 1;
    o.cold = false;
    o.timer = v1::TIMER_CUDA_EVENTS;
    RETURN_IF_ERROR(MeasureOnDevice(p, {host.data(), host.data(), w.data()}, {}, impl, o).status());
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::MeasureCopyBandwidth() {
  // Device-to-device copy, read + written bytes counted, best of five: the achievable
  // streaming bandwidth (about 88% of the attribute peak on an H200).
  std::size_t free_bytes = 0, total = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free_bytes / 8);
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(CudaEvent start, CreateEvent());
  ASSIGN_OR_RETURN(CudaEvent stop, CreateEvent());
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(src.get(), 1, bytes, stream_.get()));
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream_.get()));
    KE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream_.get()));
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream_.get()));
    KE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
    float ms = 0;
    KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (i > 0 && ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / Seconds(ms));
  }
  copy_bandwidth_.store(best);
  return absl::OkStatus();
}

absl::StatusOr<Measurement> CudaBackend::Measure(const Problem& problem, const HostInputs& inputs,
                                                 const HostOutputs& outputs,
                                                 const std::string& impl,
                                                 const MeasureOptions& options) {
  const CudaImplementation* found = nullptr;
  for (const CudaImplementation& i : impls_) {
    if (i.name == impl) found = &i;
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("implementation '", impl, "' is not available on ", name_));
  }
  if (found->submitted && !options.check_calls) {
    // However a request reached it, submitted code runs only under the checks.
    return absl::FailedPreconditionError(
        absl::StrCat("submission ", impl, " runs only with every call checked"));
  }
  if (!healthy_.load()) {
    return absl::UnavailableError(absl::StrCat(name_, " is recovering from a CUDA fault"));
  }
  KE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  absl::StatusOr<Measurement> m = MeasureOnDevice(problem, inputs, outputs, *found, options);
  if (!m.ok()) {
    // A sticky error poisons the context: the caller gets the error, and the worker
    // resets and rebuilds the device (Recover) before the next job. Errors of the request
    // itself (out of memory, a bad timer) leave it healthy.
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (IsStickyError(sticky) || IsStickyError(cudaGetLastError())) {
      healthy_.store(false);
      ReportFault();
    }
  }
  return m;
}

absl::Status CudaBackend::Recover() {
  kept_weight_ = DeviceBuffer();
  kept_set_ = BufferSet();
  kept_buffers_.Clear();
  stream_.Reset();
  flush_ = DeviceBuffer();
  flush_sink_ = DeviceBuffer();
  gate_flag_ = DeviceBuffer();
  gate_stream_.Reset();
  staging_ = PinnedBuffer();
  KE_CUDA_NO_THROW(cudaSetDevice(ordinal_));
  KE_CUDA_NO_THROW(cudaDeviceReset());
  KE_CUDA_NO_THROW(cudaGetLastError());
  const absl::Status warm = WarmUp();
  healthy_.store(warm.ok());
  return warm;
}

// A measurement's device state. Declared after its CUPTI lease, so that the graph it
// replays is destroyed before the lease detaches CUPTI.
struct CudaBackend::Workspace {
  const Problem* problem = nullptr;
  const CudaImplementation* impl = nullptr;
  bool in_place = false;
  bool writes_residual = false;
  std::vector<BufferSet> rotation;  // sets beyond the kept one, this measurement only
  std::vector<BufferSet*> sets;     // kept set first
  CudaEvent start, stop;
  // Staged tensors (StageInputs): where the result call's copies back land, and the event
  // that marks them done.
  unsigned char* staged_output = nullptr;
  unsigned char* staged_residual_out = nullptr;
  CudaEvent copied;
  CudaGraphExec graph;
  std::uint32_t calls = 1;    // per sample: graph_calls in graph replay
  std::size_t next = 0;       // the set of the next timed call
  std::uint32_t samples = 0;  // TimedCall so far, warm-up included
  // The CUPTI timer's kernels of each window, warm-up included (WorkloadResult.kernels).
  std::vector<std::vector<TimedKernel>> kernel_windows;

  // Submitted kernels: every call checked (call_checks.h). Inputs are generated on the
  // device from seeds (their pristine values are recomputed, never stored), the weight is
  // kept in a copy, and one CallCheckCounts record per checked call or input set.
  struct Checks {
    bool on = false;
    CallCheckPlan plan;
    v1::Tolerance tolerance;
    std::uint64_t seed = 0;
    DeviceBuffer pristine_weight;
    DeviceBuffer records;
    std::size_t used = 0;         // records written
    std::uint64_t call = 0;       // calls so far, warm-up included
    std::uint64_t input_key = 0;  // whose inputs the last checked call got (RepeatsInputs)
    // kChained (hot and graph replay): the calls of a batch write slots of their own,
    // checked together after their window (CheckBatch).
    DeviceBuffer slots;
    // Their weight, generated in [-1, 1) (guard after it) and a pristine copy: fed its
    // predecessor's output again and again, a chain under the workload's normal(0, 1) weight
    // concentrates each row in its largest-weight columns (values past 100 after 50 calls,
    // where the two-kernel baseline's rounded sum drifted past the bf16 tolerance); with
    // |weight| < 1 every value stays within a few units.
    DeviceBuffer chain_weight, chain_pristine_weight;
    // IN_PLACE: the seeds of each call's hidden_states (CheckInPlaceChain) and the replayed
    // sums.
    DeviceBuffer chain_seeds, chain_state;
    std::vector<ChainedCall> pending;  // the batch's calls launched so far, by slot
    std::uint64_t batches = 0;         // batches checked (the seeds of the next one's slots)
    std::uint64_t checked = 0;         // calls checked
    std::string failure;               // the first failed call and its findings
    bool finished = false;             // after FinishCheckedCalls: later calls unchecked
  } checks;

  // Once the slots exist (PrepareCheckedCalls): the result call before runs on set 0.
  bool Chained() const {
    return checks.on && checks.plan.timing == CallCheckTiming::kChained &&
           checks.slots.get() != nullptr;
  }
  // Tensor `t` (0: output, or hidden_states in IN_PLACE; 1: residual_out, or residual) of
  // slot `j`.
  void* Slot(std::size_t j, std::size_t t) const {
    const CallCheckPlan& plan = checks.plan;
    return static_cast<unsigned char*>(checks.slots.get()) +
           (j * plan.slot_tensors + t) * plan.slot_stride;
  }
  // The key of slot `j`'s generated inputs and guards in the current batch: apart from
  // the input sets' keys (their index).
  std::uint64_t SlotKey(std::size_t j) const {
    return (1ull << 63) | (checks.batches * checks.plan.batch_calls + j);
  }

  FusedAddRmsNormArgs Args(const BufferSet& s, const DeviceBuffer& weight) const {
    FusedAddRmsNormArgs a;
    a.dtype = problem->dtype;
    a.mode = problem->mode;
    a.batch = problem->batch;
    a.hidden = problem->hidden;
    a.eps = problem->eps;
    a.hidden_states = s.x.get();
    a.residual = s.r.get();
    a.weight = weight.get();
    a.output = in_place ? s.x.get() : s.out.get();
    a.residual_out = !writes_residual ? nullptr : in_place ? s.r.get() : s.res.get();
    return a;
  }

  // Call `position` of a window: a rotation set's (`position` is the set), or, chained,
  // slot `position`'s (server/call_checks.h).
  FusedAddRmsNormArgs CallArgs(std::size_t position, const DeviceBuffer& weight) const {
    if (!Chained()) return Args(*sets[position], weight);
    FusedAddRmsNormArgs a = Args(*sets[position % sets.size()], weight);
    a.weight = checks.chain_weight.get();
    if (in_place) {
      // Its own hidden_states, and the residual as the previous call left it (one buffer,
      // slot 0's second tensor): each call depends on its predecessor.
      a.hidden_states = a.output = Slot(position, 0);
      a.residual = a.residual_out = Slot(0, 1);
      return a;
    }
    if (position > 0) a.hidden_states = Slot(position - 1, 0);
    a.output = Slot(position, 0);
    if (writes_residual) a.residual_out = Slot(position, 1);
    return a;
  }
  void* Scratch(std::size_t position) const {
    return sets[Chained() ? position % sets.size() : position]->scratch.get();
  }
};

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
  Workspace w;
  w.problem = &problem;
  w.impl = &impl;
  // Each Measure (a verification round is one) starts from fresh module state.
  if (impl.reset) {
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    RETURN_IF_ERROR(impl.reset());
  }
  // Run's time split: host-to-device is PrepareInputs (allocation and the input copies; from
  // pageable memory the driver stages them before returning, from pinned memory what is
  // still in flight lands in device time); device-to-host is the copies back after the
  // result call's kernel has finished (RunResultCall); device time is the rest.
  const auto begun = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(PrepareInputs(problem, inputs, options, &w));
  const auto prepared = std::chrono::steady_clock::now();

  // A Run's default (one hot call, no warm-up, events): the result call is the timed call,
  // as on the CPU, which saves a second launch and synchronisation on the latency path.
  const bool result_call_is_sample = !options.graph && !options.cold && !options.adaptive.enabled &&
                                     options.warmup == 0 && options.repetitions == 1 &&
                                     timer == v1::TIMER_CUDA_EVENTS &&
                                     !options.measure_dram_bytes && !options.check_calls;
  double copy_back_seconds = 0;
  ASSIGN_OR_RETURN(const double first,
                   RunResultCall(outputs, result_call_is_sample, &w, &copy_back_seconds));
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
  RETURN_IF_ERROR(BuildGraph(options, &w));
  RETURN_IF_ERROR(Admit(&m.admission));
  {
    ClockSampler sampler(static_info_.uuid(), ClockSamplePeriodMs());
    ASSIGN_OR_RETURN(Measurement timed,
                     CollectSamples(options, [&] { return TimedCall(options, timer, lease, &w); }));
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
    m.dram = CountDramBytes(options, &lease, &w);
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
  if (timer != v1::TIMER_CUPTI && timer != v1::TIMER_CUDA_EVENTS) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol.timer: ", v1::Timer_Name(timer), " is not available on ", name_));
  }
  return timer;
}

namespace {

// The guard regions of a set: the end of each distinct tensor buffer (in IN_PLACE the output
// and residual_out are the inputs' buffers).
struct Guarded {
  void* end;
  CallCheckTensor tensor;
};

std::vector<Guarded> GuardedEnds(const FusedAddRmsNormArgs& a, std::size_t tensor_bytes,
                                 std::size_t weight_bytes) {
  auto end = [](const void* p, std::size_t bytes) {
    return static_cast<void*>(static_cast<unsigned char*>(const_cast<void*>(p)) + bytes);
  };
  std::vector<Guarded> g = {{end(a.hidden_states, tensor_bytes), kCheckHiddenStates},
                            {end(a.residual, tensor_bytes), kCheckResidual},
                            {end(a.weight, weight_bytes), kCheckWeight}};
  if (a.output != a.hidden_states) g.push_back({end(a.output, tensor_bytes), kCheckOutput});
  if (a.residual_out != nullptr && a.residual_out != a.residual) {
    g.push_back({end(a.residual_out, tensor_bytes), kCheckResidualOut});
  }
  return g;
}

// `key` is the call (kEveryCall), or the input set or slot (kChained) whose guards these
// are. The weight is shared by every call of a window: there its guard has one seed.
std::uint64_t GuardSeed(const CallCheckPlan& plan, std::uint64_t base, std::uint64_t key,
                        CallCheckTensor tensor) {
  if (tensor == kCheckWeight && plan.timing == CallCheckTiming::kChained) key = ~0ull;
  return CallTensorSeed(base, key, kCheckTensors + tensor);
}

}  // namespace

absl::Status CudaBackend::StageInputs(const Problem& problem, const HostInputs& inputs,
                                      Workspace* w, HostInputs* staged) {
  // Up to a few MiB: a small Run's copies from pageable memory cost more than the copy into
  // staging, and they are synchronous, each its own wait for the device.
  constexpr std::size_t kMaxStagingBytes = 8 << 20;
  auto aligned = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::size_t tensor = aligned(problem.TensorBytes());
  const std::size_t weight = aligned(problem.WeightBytes());
  const std::size_t bytes = tensor * (WritesResidual(problem.mode) ? 4 : 3) + weight;
  if (bytes > kMaxStagingBytes) return absl::OkStatus();
  if (staging_.bytes() < bytes) {
    staging_ = PinnedBuffer();
    absl::StatusOr<PinnedBuffer> pinned = PinnedBuffer::Allocate(kMaxStagingBytes);
    if (!pinned.ok()) {
      cudaGetLastError();  // not sticky; the copies then go from pageable memory
      return absl::OkStatus();
    }
    staging_ = *std::move(pinned);
  }
  ASSIGN_OR_RETURN(w->copied, CreateEvent());
  auto* base = static_cast<unsigned char*>(staging_.get());
  std::memcpy(base, inputs.hidden_states, problem.TensorBytes());
  std::memcpy(base + tensor, inputs.residual, problem.TensorBytes());
  std::memcpy(base + 2 * tensor, inputs.weight, problem.WeightBytes());
  *staged = {base, base + tensor, base + 2 * tensor};
  w->staged_output = base + 2 * tensor + weight;
  w->staged_residual_out = WritesResidual(problem.mode) ? w->staged_output + tensor : nullptr;
  return absl::OkStatus();
}

absl::Status CudaBackend::PrepareInputs(const Problem& problem, const HostInputs& given,
                                        const MeasureOptions& options, Workspace* w) {
  cudaStream_t stream = stream_.get();
  HostInputs inputs = given;
  RETURN_IF_ERROR(StageInputs(problem, given, w, &inputs));
  const std::size_t row_bytes = problem.TensorBytes();
  const CudaImplementation& impl = *w->impl;
  w->writes_residual = WritesResidual(problem.mode);
  w->in_place = problem.mode == Mode::kInPlace;
  // Input sets: one, or enough that rotating among them leaves nothing of a set in L2 by
  // its next use (3x L2 in total), within a quarter of the free memory.
  const std::size_t set_bytes =
      row_bytes * (2 + (w->in_place ? 0 : 1) + (w->writes_residual && !w->in_place ? 1 : 0) +
                   (impl.needs_scratch ? 1 : 0));
  std::size_t sets_wanted = 1;
  if (options.rotate_inputs && set_bytes > 0) {
    std::size_t free_bytes = 0, total = 0;
    KE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
    const std::size_t by_l2 = 3 * static_info_.l2_cache_bytes() / set_bytes + 1;
    const std::size_t by_memory = std::max<std::size_t>(1, free_bytes / 4 / set_bytes);
    sets_wanted = std::clamp<std::size_t>(std::min(by_l2, by_memory), 1, 64);
  }
  // Checked calls: every tensor is followed by a guard region (call_checks.h).
  w->checks.on = options.check_calls;
  if (w->checks.on) {
    std::size_t free_bytes = 0, total = 0;
    KE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
    ASSIGN_OR_RETURN(w->checks.plan, PlanCallChecks(problem, options, free_bytes / 4));
    w->checks.tolerance = options.check_tolerance;
    w->checks.seed = SecretSeed();
  }
  const std::size_t guard = w->checks.on ? w->checks.plan.guard_bytes : 0;
  RETURN_IF_ERROR(kept_buffers_.Fit(kWeightRole, problem.WeightBytes() + guard, &kept_weight_));
  KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(kept_weight_.get(), inputs.weight, problem.WeightBytes(),
                                          cudaMemcpyHostToDevice, stream));
  if (w->checks.on) {
    // Kept before any call of the submission can touch it: a change made by the result call
    // shows at the first checked call.
    ASSIGN_OR_RETURN(w->checks.pristine_weight, DeviceBuffer::Allocate(problem.WeightBytes()));
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(w->checks.pristine_weight.get(), kept_weight_.get(),
                                            problem.WeightBytes(), cudaMemcpyDeviceToDevice,
                                            stream));
  }
  // The first set is the kept one; rotation sets live for this measurement only.
  w->rotation.resize(sets_wanted - 1);
  w->sets = {&kept_set_};
  for (BufferSet& s : w->rotation) w->sets.push_back(&s);
  for (BufferSet* s : w->sets) {
    // The kept set's buffers come back for each later call of their size; a rotation set's
    // are this measurement's only.
    auto fit = [&](BufferRole role, DeviceBuffer* b, std::size_t bytes) {
      return s == &kept_set_ ? kept_buffers_.Fit(role, bytes, b) : Allocate(b, bytes);
    };
    RETURN_IF_ERROR(fit(kXRole, &s->x, row_bytes + guard));
    RETURN_IF_ERROR(fit(kRRole, &s->r, row_bytes + guard));
    if (!w->in_place) RETURN_IF_ERROR(fit(kOutRole, &s->out, row_bytes + guard));
    if (w->writes_residual && !w->in_place) {
      RETURN_IF_ERROR(fit(kResRole, &s->res, row_bytes + guard));
    }
    if (impl.needs_scratch) {
      RETURN_IF_ERROR(fit(kScratchRole, &s->scratch, row_bytes));
      // Kept buffers hold what an earlier call left, perhaps another caller's sums: checked
      // code (every submission) starts from zeros. Inputs are copied in below; outputs are
      // poisoned before each checked call.
      if (w->checks.on) {
        KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->scratch.get(), 0, s->scratch.bytes(), stream));
      }
    }
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->x.get(), inputs.hidden_states, row_bytes,
                                            cudaMemcpyHostToDevice, stream));
    KE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(s->r.get(), inputs.residual, row_bytes, cudaMemcpyHostToDevice, stream));
    if (w->checks.on) {
      // Even the result call finds random bytes past its tensors, never another buffer.
      for (const Guarded& g :
           GuardedEnds(w->Args(*s, kept_weight_), row_bytes, problem.WeightBytes())) {
        KE_CUDA_RETURN_IF_ERROR(FillGuard(g.end, guard, SecretSeed(), stream));
      }
    }
  }
  ASSIGN_OR_RETURN(w->start, CreateEvent());
  ASSIGN_OR_RETURN(w->stop, CreateEvent());
  return absl::OkStatus();
}

absl::Status CudaBackend::WriteCheckedInputs(Workspace* w, std::size_t set, std::uint64_t key,
                                             std::uint64_t guard_key) {
  cudaStream_t stream = stream_.get();
  const Problem& p = *w->problem;
  const Workspace::Checks& c = w->checks;
  BufferSet& s = *w->sets[set];
  const FusedAddRmsNormArgs a = w->Args(s, kept_weight_);
  const std::size_t n = p.TensorElements(), bytes = p.TensorBytes();
  KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(
      s.x.get(), n, p.dtype, CallTensorSeed(c.seed, key, kCheckHiddenStates), stream));
  KE_CUDA_RETURN_IF_ERROR(
      FillCheckedInput(s.r.get(), n, p.dtype, CallTensorSeed(c.seed, key, kCheckResidual), stream));
  if (!w->in_place) {
    // Poisoned with seeded numbers (PoisonOutput): an element the call does not write fails.
    RETURN_IF_ERROR(PoisonOutput(w, s.out.get(), guard_key, kCheckOutput));
    if (w->writes_residual) {
      RETURN_IF_ERROR(PoisonOutput(w, s.res.get(), guard_key, kCheckResidualOut));
    }
  }
  for (const Guarded& g : GuardedEnds(a, bytes, p.WeightBytes())) {
    KE_CUDA_RETURN_IF_ERROR(FillGuard(g.end, c.plan.guard_bytes,
                                      GuardSeed(c.plan, c.seed, guard_key, g.tensor), stream));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::PoisonOutput(Workspace* w, void* data, std::uint64_t key,
                                       CallCheckTensor tensor) {
  // Seeded numbers in [-2, 2), not NaN: a kernel that skips a row whose output "already holds
  // numbers" (or probes one element of it) finds numbers and leaves them, and its check
  // fails; with NaN it would have found nothing to reuse and computed, its trick unseen. An
  // element left unwritten fails all the same, unless the seeded number happens to lie
  // within the tolerance of the answer (about 1% of the time in bf16): a row of them never.
  const Problem& p = *w->problem;
  KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(data, p.TensorElements(), p.dtype,
                                           CallTensorSeed(w->checks.seed, key, tensor),
                                           stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::CheckCallOnDevice(Workspace* w, std::size_t set, std::uint64_t key,
                                            std::uint64_t guard_key, std::size_t record) {
  cudaStream_t stream = stream_.get();
  const Problem& p = *w->problem;
  Workspace::Checks& c = w->checks;
  if (record >= c.plan.records) return absl::OkStatus();
  auto* counts = static_cast<CallCheckCounts*>(c.records.get()) + record;
  const FusedAddRmsNormArgs a = w->Args(*w->sets[set], kept_weight_);
  if (c.plan.check_outputs || c.plan.check_inputs) {
    CallCheckArgs args;
    args.dtype = p.dtype;
    args.mode = p.mode;
    args.batch = p.batch;
    args.hidden = p.hidden;
    args.eps = p.eps;
    args.atol = c.tolerance.atol();
    args.rtol = c.tolerance.rtol();
    args.hidden_states = a.hidden_states;
    args.residual = a.residual;
    args.weight = a.weight;
    args.output = a.output;
    args.residual_out = a.residual_out;
    args.hidden_states_seed = CallTensorSeed(c.seed, key, kCheckHiddenStates);
    args.residual_seed = CallTensorSeed(c.seed, key, kCheckResidual);
    args.pristine_weight = c.pristine_weight.get();
    KE_CUDA_RETURN_IF_ERROR(CheckCall(args, counts, stream));
  }
  for (const Guarded& g : GuardedEnds(a, p.TensorBytes(), p.WeightBytes())) {
    KE_CUDA_RETURN_IF_ERROR(CheckGuard(g.end, c.plan.guard_bytes,
                                       GuardSeed(c.plan, c.seed, guard_key, g.tensor), g.tensor,
                                       counts, stream));
  }
  c.used = std::max(c.used, record + 1);
  return absl::OkStatus();
}

absl::Status CudaBackend::PrepareCheckedCalls(Workspace* w) {
  Workspace::Checks& c = w->checks;
  if (!c.on) return absl::OkStatus();
  cudaStream_t stream = stream_.get();
  ASSIGN_OR_RETURN(c.records, DeviceBuffer::Allocate(c.plan.records * sizeof(CallCheckCounts)));
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c.records.get(), 0, c.records.bytes(), stream));
  if (c.plan.timing == CallCheckTiming::kChained) {
    // The input sets' inputs and guards, once: every chain starts at set 0's hidden_states
    // (written again for each window, PrepareBatch), and call j reads set j's residual.
    // Then the slots.
    for (std::size_t set = 0; set < w->sets.size(); ++set) {
      RETURN_IF_ERROR(WriteCheckedInputs(w, set, set, set));
    }
    ASSIGN_OR_RETURN(c.slots, DeviceBuffer::Allocate(c.plan.batch_calls * c.plan.slot_tensors *
                                                     c.plan.slot_stride));
    const Problem& p = *w->problem;
    const std::size_t weight_bytes = p.WeightBytes();
    ASSIGN_OR_RETURN(c.chain_weight, DeviceBuffer::Allocate(weight_bytes + c.plan.guard_bytes));
    ASSIGN_OR_RETURN(c.chain_pristine_weight, DeviceBuffer::Allocate(weight_bytes));
    KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(c.chain_weight.get(),
                                             static_cast<std::size_t>(p.hidden), p.dtype,
                                             CallTensorSeed(c.seed, ~0ull, kCheckWeight), stream,
                                             /*scale=*/0.5f));
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.chain_pristine_weight.get(), c.chain_weight.get(),
                                            weight_bytes, cudaMemcpyDeviceToDevice, stream));
    KE_CUDA_RETURN_IF_ERROR(
        FillGuard(static_cast<unsigned char*>(c.chain_weight.get()) + weight_bytes,
                  c.plan.guard_bytes, GuardSeed(c.plan, c.seed, 0, kCheckWeight), stream));
    if (w->in_place) {
      ASSIGN_OR_RETURN(c.chain_seeds,
                       DeviceBuffer::Allocate(c.plan.batch_calls * sizeof(std::uint64_t)));
      ASSIGN_OR_RETURN(c.chain_state, DeviceBuffer::Allocate(p.TensorBytes()));
    }
    RETURN_IF_ERROR(PrepareBatch(w));
  }
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::PrepareBatch(Workspace* w) {
  cudaStream_t stream = stream_.get();
  const Problem& p = *w->problem;
  const Workspace::Checks& c = w->checks;
  const std::size_t n = p.TensorElements(), bytes = p.TensorBytes();
  for (std::size_t j = 0; j < c.plan.batch_calls; ++j) {
    const std::uint64_t key = w->SlotKey(j);
    // IN_PLACE: the call's own hidden_states, which it overwrites with its output, and
    // (slot 0) the residual the chain starts from. Else the outputs, poisoned
    // (PoisonOutput): an element the call does not write fails, and so does the next call,
    // which reads it as its hidden_states.
    std::vector<std::pair<void*, CallCheckTensor>> tensors;
    if (w->in_place) {
      KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(
          w->Slot(j, 0), n, p.dtype, CallTensorSeed(c.seed, key, kCheckHiddenStates), stream));
      tensors.push_back({w->Slot(j, 0), kCheckHiddenStates});
      if (j == 0) {
        KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(
            w->Slot(0, 1), n, p.dtype, CallTensorSeed(c.seed, key, kCheckResidual), stream));
        tensors.push_back({w->Slot(0, 1), kCheckResidual});
      }
    } else {
      if (j == 0) {
        // The chain's start, new for every window: no window repeats an earlier one's chain,
        // so an answer kept from an earlier window is never this one's.
        KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(w->sets.front()->x.get(), n, p.dtype,
                                                 CallTensorSeed(c.seed, key, kCheckHiddenStates),
                                                 stream));
      }
      for (std::size_t t = 0; t < c.plan.slot_tensors; ++t) {
        const CallCheckTensor role = t == 0 ? kCheckOutput : kCheckResidualOut;
        RETURN_IF_ERROR(PoisonOutput(w, w->Slot(j, t), key, role));
        tensors.push_back({w->Slot(j, t), role});
      }
    }
    for (const auto& [tensor, role] : tensors) {
      KE_CUDA_RETURN_IF_ERROR(FillGuard(static_cast<unsigned char*>(tensor) + bytes,
                                        c.plan.guard_bytes, GuardSeed(c.plan, c.seed, key, role),
                                        stream));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::CheckBatch(const MeasureOptions& options, Workspace* w, bool again) {
  Workspace::Checks& c = w->checks;
  if (c.pending.empty()) return absl::OkStatus();
  cudaStream_t stream = stream_.get();
  const Problem& p = *w->problem;
  const std::size_t bytes = p.TensorBytes();
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c.records.get(), 0, c.records.bytes(), stream));
  auto* records = static_cast<CallCheckCounts*>(c.records.get());
  if (w->in_place) {
    std::vector<std::uint64_t> seeds(c.pending.size());
    for (std::size_t j = 0; j < seeds.size(); ++j) {
      seeds[j] = CallTensorSeed(c.seed, w->SlotKey(j), kCheckHiddenStates);
    }
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.chain_seeds.get(), seeds.data(),
                                            seeds.size() * sizeof(std::uint64_t),
                                            cudaMemcpyHostToDevice, stream));
    ChainCheckArgs args;
    args.dtype = p.dtype;
    args.batch = p.batch;
    args.hidden = p.hidden;
    args.eps = p.eps;
    args.atol = c.tolerance.atol();
    args.rtol = c.tolerance.rtol();
    args.calls = static_cast<int>(c.pending.size());
    args.slots = static_cast<const unsigned char*>(w->Slot(0, 0));
    args.slot_stride = c.plan.slot_tensors * c.plan.slot_stride;
    args.hidden_states_seeds = static_cast<const std::uint64_t*>(c.chain_seeds.get());
    args.residual_seed = CallTensorSeed(c.seed, w->SlotKey(0), kCheckResidual);
    args.residual = w->Slot(0, 1);
    args.weight = c.chain_weight.get();
    args.pristine_weight = c.chain_pristine_weight.get();
    args.state = c.chain_state.get();
    KE_CUDA_RETURN_IF_ERROR(CheckInPlaceChain(args, records, stream));
    for (std::size_t j = 0; j < c.pending.size(); ++j) {
      KE_CUDA_RETURN_IF_ERROR(
          CheckGuard(static_cast<unsigned char*>(w->Slot(j, 0)) + bytes, c.plan.guard_bytes,
                     GuardSeed(c.plan, c.seed, w->SlotKey(j), kCheckHiddenStates),
                     kCheckHiddenStates, records + j, stream));
    }
  }
  for (std::size_t j = 0; j < c.pending.size() && !w->in_place; ++j) {
    // The set's residual, and the set's hidden_states for the first call of the batch, the
    // previous call's output after it.
    const FusedAddRmsNormArgs a = w->CallArgs(j, kept_weight_);
    const std::uint64_t key = w->SlotKey(j);
    const std::uint64_t set = j % w->sets.size();
    CallCheckArgs args;
    args.dtype = p.dtype;
    args.mode = p.mode;
    args.batch = p.batch;
    args.hidden = p.hidden;
    args.eps = p.eps;
    args.atol = c.tolerance.atol();
    args.rtol = c.tolerance.rtol();
    args.hidden_states = a.hidden_states;
    args.residual = a.residual;
    args.weight = a.weight;
    args.output = a.output;
    args.residual_out = a.residual_out;
    args.pristine_weight = c.chain_pristine_weight.get();
    args.hidden_states_seed = CallTensorSeed(c.seed, w->SlotKey(0), kCheckHiddenStates);
    args.residual_seed = CallTensorSeed(c.seed, set, kCheckResidual);
    args.hidden_states_given = j > 0;
    KE_CUDA_RETURN_IF_ERROR(CheckCall(args, records + j, stream));
    const CallCheckTensor tensors[2] = {kCheckOutput, kCheckResidualOut};
    for (std::size_t t = 0; t < c.plan.slot_tensors; ++t) {
      KE_CUDA_RETURN_IF_ERROR(
          CheckGuard(static_cast<unsigned char*>(w->Slot(j, t)) + bytes, c.plan.guard_bytes,
                     GuardSeed(c.plan, c.seed, key, tensors[t]), tensors[t], records + j, stream));
    }
  }
  // What the calls share, in the batch's last record: the guards of the input sets and of
  // the weight. (The inputs themselves are compared by the checks of the calls that read
  // them.)
  CallCheckCounts* shared = records + c.plan.batch_calls;
  if (w->in_place) {
    KE_CUDA_RETURN_IF_ERROR(CheckGuard(
        static_cast<unsigned char*>(w->Slot(0, 1)) + bytes, c.plan.guard_bytes,
        GuardSeed(c.plan, c.seed, w->SlotKey(0), kCheckResidual), kCheckResidual, shared, stream));
  }
  KE_CUDA_RETURN_IF_ERROR(CheckGuard(
      static_cast<const unsigned char*>(c.chain_weight.get()) + p.WeightBytes(), c.plan.guard_bytes,
      GuardSeed(c.plan, c.seed, 0, kCheckWeight), kCheckWeight, shared, stream));
  // The workload's weight, which only the result call was given, unchanged since.
  KE_CUDA_RETURN_IF_ERROR(CheckUnchanged(kept_weight_.get(), c.pristine_weight.get(),
                                         static_cast<std::size_t>(p.hidden), p.dtype, kCheckWeight,
                                         shared, stream));
  for (std::size_t set = 0; set < w->sets.size(); ++set) {
    const FusedAddRmsNormArgs a = w->Args(*w->sets[set], kept_weight_);
    for (const Guarded& g : GuardedEnds(a, bytes, p.WeightBytes())) {
      if (g.tensor == kCheckOutput || g.tensor == kCheckResidualOut) continue;  // unused
      KE_CUDA_RETURN_IF_ERROR(CheckGuard(g.end, c.plan.guard_bytes,
                                         GuardSeed(c.plan, c.seed, set, g.tensor), g.tensor, shared,
                                         stream));
    }
  }
  std::vector<CallCheckCounts> counts(c.plan.records);
  KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counts.data(), c.records.get(),
                                          counts.size() * sizeof(CallCheckCounts),
                                          cudaMemcpyDeviceToHost, stream));
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (std::size_t j = 0; j < c.pending.size() && c.failure.empty(); ++j) {
    const std::string found = DescribeCallCheck(counts[j], p, c.plan, c.tolerance);
    if (!found.empty()) {
      c.failure = absl::StrCat(ChainedCallName(options, c.pending[j]), ": ", found);
    }
  }
  if (c.failure.empty()) {
    const std::string found = DescribeCallCheck(counts.back(), p, c.plan, c.tolerance);
    if (!found.empty()) {
      c.failure =
          absl::StrCat("a call up to ", ChainedCallName(options, c.pending.back()), ": ", found);
    }
  }
  c.checked += c.pending.size();
  c.pending.clear();
  ++c.batches;
  if (again) RETURN_IF_ERROR(PrepareBatch(w));
  return absl::OkStatus();
}

absl::Status CudaBackend::StartTimedPhase(const MeasureOptions& options, Workspace* w) {
  // Submitted code starts the timed calls from fresh module state: nothing it counted or
  // kept during the warm-up is left. A graph holds the old module's functions: it goes
  // first and is built again (its first launch checked like any replay).
  if (!w->impl->reset) return absl::OkStatus();
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  w->graph.Reset();
  RETURN_IF_ERROR(w->impl->reset());
  return BuildGraph(options, w);
}

absl::Status CudaBackend::FinishCheckedCalls(const MeasureOptions& options, Workspace* w,
                                             Measurement* m) {
  Workspace::Checks& c = w->checks;
  if (!c.on) return absl::OkStatus();
  cudaStream_t stream = stream_.get();
  if (c.plan.timing == CallCheckTiming::kChained) {
    RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/false));
    c.finished = true;
    m->calls_checked = static_cast<std::uint32_t>(std::min<std::uint64_t>(c.checked, ~0u));
    m->call_check_failure = c.failure;
    return absl::OkStatus();
  }
  std::vector<CallCheckCounts> counts(c.used);
  if (c.used > 0) {
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counts.data(), c.records.get(),
                                            c.used * sizeof(CallCheckCounts),
                                            cudaMemcpyDeviceToHost, stream));
  }
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  m->calls_checked = static_cast<std::uint32_t>(c.used);
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::string found = DescribeCallCheck(counts[i], *w->problem, c.plan, c.tolerance);
    if (found.empty()) continue;
    m->call_check_failure = absl::StrCat(CheckedCallName(c.plan, options, i), ": ", found);
    break;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Launch(Workspace* w, std::size_t position) {
  KE_CUDA_RETURN_IF_ERROR(
      w->impl->launch(w->CallArgs(position, kept_weight_), w->Scratch(position), stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::Enqueue(const MeasureOptions& options, Workspace* w, std::size_t set) {
  if (options.graph) {
    KE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(w->graph.get(), stream_.get()));
    return absl::OkStatus();
  }
  return Launch(w, set);
}

absl::Status CudaBackend::FlushL2(const MeasureOptions& options) {
  if (options.cold && flush_.bytes() > 0) {
    // The flush's grid grows by one CTA per call, cycling over the SM count. With the same
    // grid every call, the calls of a measurement all started from one state of the CTA
    // scheduler (their CTAs on the same SMs), apparently set by what ran before it: the
    // two-kernel baseline's second kernel, which reads what the first left in L2, ran 1408
    // ns in some measurements and 1536-1600 in others (B = 34 / 64, H200), its mean 9%
    // apart over four runs of one server. Cycled: 0.7-2.0%, and three runs of both suites
    // within 1.9% at every workload (docs/results/measurement-h200.md).
    const int sms = static_info_.sm_count();
    const int extra = sms > 0 ? static_cast<int>(flush_calls_++ % static_cast<unsigned>(sms)) : 0;
    KE_CUDA_RETURN_IF_ERROR(LaunchL2Flush(flush_.get(), flush_.bytes(),
                                          static_cast<unsigned*>(flush_sink_.get()), sms,
                                          stream_.get(), extra));
  }
  return absl::OkStatus();
}

// Hot calls timed with events run behind a gate (stream_gate_cuda.h) that opens once the
// start event, the call and the stop event are queued: without it the events also time the
// host's launch. Cold calls need none: the flush kernel ahead of them is long enough.
// Each gate waits for its own generation's value, so closing it is the launch alone.
absl::Status CudaBackend::CloseGate() {
  gate_generation_ = gate_generation_ == 255 ? 1 : gate_generation_ + 1;
  KE_CUDA_RETURN_IF_ERROR(LaunchStreamGate(static_cast<volatile int*>(gate_flag_.get()),
                                           static_cast<int>(gate_generation_ * 0x01010101u),
                                           kGateTimeoutNs, stream_.get()));
  return absl::OkStatus();
}

// A write from a second stream: a host-mapped flag would do, but a process whose context
// faults with page-locked host memory mapped takes ~1 s longer to fail and its successor
// ~2 s longer to start (H200, docs/results/device-isolation-h200.md). The write sets every
// byte of the flag to the generation, which is the value the gate waits for.
void CudaBackend::OpenGate() {
  if (cudaMemsetAsync(gate_flag_.get(), gate_generation_, sizeof(int), gate_stream_.get()) !=
      cudaSuccess) {
    cudaGetLastError();  // not sticky; the gate then opens by its timeout
  }
}

absl::StatusOr<double> CudaBackend::RunResultCall(const HostOutputs& outputs, bool timed,
                                                  Workspace* w, double* copy_back_seconds) {
  // The result call on pristine inputs; its outputs are what the caller sees.
  cudaStream_t stream = stream_.get();
  const std::size_t row_bytes = w->problem->TensorBytes();
  BufferSet& s = *w->sets.front();
  if (!w->in_place) {
    // Poisoned so that an element the kernel does not write cannot pass as correct.
    KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.out.get(), 0xff, row_bytes, stream));
    if (w->writes_residual) {
      KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.res.get(), 0xff, row_bytes, stream));
    }
  }
  if (timed) {
    RETURN_IF_ERROR(CloseGate());
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(w->start.get(), stream));
  }
  const absl::Status launched = Launch(w, 0);
  if (timed) {
    // Opened before the copies back: a copy to pageable memory waits for the stream.
    const cudaError_t recorded = cudaEventRecord(w->stop.get(), stream);
    OpenGate();
    RETURN_IF_ERROR(launched);
    KE_CUDA_RETURN_IF_ERROR(recorded);
  }
  RETURN_IF_ERROR(launched);
  const FusedAddRmsNormArgs a = w->Args(s, kept_weight_);
  const bool copies_back = outputs.output != nullptr || outputs.residual_out != nullptr;
  const bool copies_residual = w->writes_residual && outputs.residual_out != nullptr;
  if (copies_back && w->staged_output != nullptr) {
    // Staged: the copies back follow the kernel in stream order into page-locked memory,
    // and one wait covers both. They are timed on the device, from the kernel's end.
    if (!timed) KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(w->stop.get(), stream));
    if (outputs.output != nullptr) {
      KE_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(w->staged_output, a.output, row_bytes, cudaMemcpyDeviceToHost, stream));
    }
    if (copies_residual) {
      KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(w->staged_residual_out, a.residual_out, row_bytes,
                                              cudaMemcpyDeviceToHost, stream));
    }
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(w->copied.get(), stream));
    KE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(w->copied.get()));
    const auto landed = std::chrono::steady_clock::now();
    if (outputs.output != nullptr) std::memcpy(outputs.output, w->staged_output, row_bytes);
    if (copies_residual) std::memcpy(outputs.residual_out, w->staged_residual_out, row_bytes);
    float copy_ms = 0;
    KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&copy_ms, w->stop.get(), w->copied.get()));
    *copy_back_seconds =
        Seconds(copy_ms) +
        std::chrono::duration<double>(std::chrono::steady_clock::now() - landed).count();
  } else {
    // The kernel is waited for first so that the copies back are timed on their own; the
    // copy to pageable memory would wait for it anyway.
    if (copies_back) KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    const auto computed = std::chrono::steady_clock::now();
    if (outputs.output != nullptr) {
      KE_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(outputs.output, a.output, row_bytes, cudaMemcpyDeviceToHost, stream));
    }
    if (copies_residual) {
      KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(outputs.residual_out, a.residual_out, row_bytes,
                                              cudaMemcpyDeviceToHost, stream));
    }
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    if (copies_back) {
      *copy_back_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - computed).count();
    }
  }
  if (!timed) return 0.0;
  float ms = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, w->start.get(), w->stop.get()));
  return Seconds(ms);
}

absl::Status CudaBackend::BuildGraph(const MeasureOptions& options, Workspace* w) {
  // Graph replay: graph_calls launches (rotating sets) captured once, replayed per sample.
  if (!options.graph) return absl::OkStatus();
  cudaStream_t stream = stream_.get();
  w->calls = std::max<std::uint32_t>(1, options.graph_calls);
  KE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  absl::Status captured = absl::OkStatus();
  for (std::uint32_t k = 0; k < w->calls && captured.ok(); ++k) {
    captured = Launch(w, w->Chained() ? k : k % w->sets.size());
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &raw);
  CudaGraph graph(raw);
  RETURN_IF_ERROR(captured);
  KE_CUDA_RETURN_IF_ERROR(end);
  cudaGraphExec_t exec = nullptr;
  KE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph.get(), 0));
  w->graph = CudaGraphExec(exec);
  // Launched once at once: an exec instantiated and uploaded but never launched slowed the
  // replays of other execs by ~0.18 us per kernel on an H200 (research/benchmarking.md).
  KE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(w->graph.get(), stream));
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (w->Chained() && !w->checks.finished) {
    // Its calls wrote the slots like any replay's: checked, and the slots poisoned again.
    for (std::uint32_t k = 0; k < w->calls; ++k) {
      w->checks.pending.push_back({/*first_launch=*/true, w->samples, k, w->calls});
    }
    RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/true));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Admit(v1::ClockAdmission* admission) {
  // The load: 64 reads of 2x L2, ~2 ms on an H200, between two NVML reads.
  auto busy = [&]() -> absl::Status {
    for (int i = 0; i < 64 && flush_.bytes() > 0; ++i) {
      KE_CUDA_RETURN_IF_ERROR(LaunchL2Flush(flush_.get(), flush_.bytes(),
                                            static_cast<unsigned*>(flush_sink_.get()),
                                            static_info_.sm_count(), stream_.get()));
    }
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  };
  return AdmitClocks(static_info_.uuid(), busy, AdmissionLimits{}, admission);
}

absl::StatusOr<double> CudaBackend::TimedCall(const MeasureOptions& options, v1::Timer timer,
                                              const CuptiLease& lease, Workspace* w) {
  const std::uint32_t sample = w->samples++;
  if (sample == options.warmup && options.warmup > 0) RETURN_IF_ERROR(StartTimedPhase(options, w));
  if (w->Chained()) {
    Workspace::Checks& c = w->checks;
    // Hot without a graph: one call per sample, into the next free slot; a full batch is
    // checked first (between two samples, outside both windows).
    if (!options.graph && c.pending.size() == c.plan.batch_calls) {
      RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/true));
    }
    const std::size_t position = options.graph ? 0 : c.pending.size();
    ASSIGN_OR_RETURN(const double seconds, TimeOneCall(options, timer, lease, w, position));
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
    Workspace::Checks& c = w->checks;
    if (!RepeatsInputs(c.seed, call)) c.input_key = call;
    RETURN_IF_ERROR(WriteCheckedInputs(w, set, c.input_key, call));
  }
  ASSIGN_OR_RETURN(const double seconds, TimeOneCall(options, timer, lease, w, set));
  // After the stop point, before the next call's flush: nothing of it is timed, and the
  // flush restores the cache state it leaves.
  if (checked) RETURN_IF_ERROR(CheckCallOnDevice(w, set, w->checks.input_key, call, call));
  return seconds;
}

absl::StatusOr<double> CudaBackend::TimeOneCall(const MeasureOptions& options, v1::Timer timer,
                                                const CuptiLease& lease, Workspace* w,
                                                std::size_t set) {
  cudaStream_t stream = stream_.get();
  RETURN_IF_ERROR(FlushL2(options));
  if (timer == v1::TIMER_CUPTI) {
    // The flush must be done before the window opens: CUPTI's span would include it if it
    // ran as a kernel. Inside the window the call waits behind the stream gate until all
    // of it is queued, and the gate is left out of the span: the two-kernel baseline's span
    // otherwise included the host's gap between its launches and varied 6-31% from run to
    // run (H200, docs/results/measurement-h200.md).
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::vector<TimedKernel> kernels;
    ASSIGN_OR_RETURN(double span, CuptiKernelTimer::TimeKernels(
                                      lease, ordinal_,
                                      [&]() -> absl::Status {
                                        RETURN_IF_ERROR(CloseGate());
                                        const absl::Status enqueued = Enqueue(options, w, set);
                                        OpenGate();
                                        RETURN_IF_ERROR(enqueued);
                                        KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
                                        return absl::OkStatus();
                                      },
                                      /*skip_first=*/true, w->calls == 1 ? &kernels : nullptr));
    // One call per window only: a graph's window holds up to 1000 calls' records, too many
    // to keep for every sample.
    if (w->calls == 1) w->kernel_windows.push_back(std::move(kernels));
    return span / w->calls;
  }
  // Events: cold, the flush kernel runs ahead of the start event, so the host has queued
  // the launch by the time the start event is reached; hot, the gate does that, in graph
  // replay too (scripts/torch_peers.py spins the device before every peer's start event
  // the same way): without it the first kernel of a replay waits for the host's
  // cudaGraphLaunch inside the window.
  const bool gated = !options.cold;
  if (gated) RETURN_IF_ERROR(CloseGate());
  const cudaError_t started = cudaEventRecord(w->start.get(), stream);
  const absl::Status enqueued =
      started == cudaSuccess ? Enqueue(options, w, set) : absl::OkStatus();
  const cudaError_t stopped = cudaEventRecord(w->stop.get(), stream);
  if (gated) OpenGate();
  KE_CUDA_RETURN_IF_ERROR(started);
  RETURN_IF_ERROR(enqueued);
  KE_CUDA_RETURN_IF_ERROR(stopped);
  KE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(w->stop.get()));
  float ms = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, w->start.get(), w->stop.get()));
  return Seconds(ms) / w->calls;
}

v1::DramTraffic CudaBackend::CountDramBytes(const MeasureOptions& options, CuptiLease* lease,
                                            Workspace* w) {
  // Three windows after the timed samples, never inside them: the profiler serializes the
  // work it counts. The median per call is reported.
  constexpr int kWindows = 3;
  v1::DramTraffic traffic;
  traffic.set_cold(options.cold);
  auto unavailable = [&](const absl::Status& s) {
    traffic.set_available(false);
    traffic.set_unavailable_reason(std::string(s.message()));
    return traffic;
  };
  // The profiler needs CUPTI to itself. A graph replayed while activity tracing was on
  // faults if launched after cuptiFinalize(), so it is rebuilt after the lease changes.
  const bool was_traced = lease->kind() == CuptiLease::Kind::kActivity;
  lease->Release();
  if (options.graph && was_traced) {
    w->graph.Reset();
    if (absl::Status s = BuildGraph(options, w); !s.ok()) return unavailable(s);
  }
  absl::StatusOr<CuptiLease> profiler_lease = CuptiLease::Acquire(CuptiLease::Kind::kProfiler);
  if (!profiler_lease.ok()) {
    return unavailable(absl::UnavailableError(
        absl::StrCat("counters unavailable on this machine: ", profiler_lease.status().message())));
  }
  cudaStream_t stream = stream_.get();
  std::size_t set = 0;
  absl::StatusOr<std::vector<DramBytes>> windows = MeasureDramBytes(
      *profiler_lease, ordinal_, kWindows,
      [&]() -> absl::Status {
        RETURN_IF_ERROR(FlushL2(options));
        KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        return absl::OkStatus();
      },
      [&]() -> absl::Status {
        RETURN_IF_ERROR(Enqueue(options, w, set));
        // Chained, the positions are slots (the window's calls), not input sets.
        set = (set + 1) % (w->Chained() ? w->checks.plan.batch_calls : w->sets.size());
        KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        return absl::OkStatus();
      });
  // The graph replayed under the profiler goes before CUPTI is detached.
  w->graph.Reset();
  profiler_lease->Release();
  if (!windows.ok()) return unavailable(windows.status());
  std::vector<double> reads, writes;
  for (const DramBytes& b : *windows) {
    reads.push_back(b.read / w->calls);
    writes.push_back(b.write / w->calls);
  }
  std::sort(reads.begin(), reads.end());
  std::sort(writes.begin(), writes.end());
  traffic.set_available(true);
  traffic.set_windows(static_cast<std::uint32_t>(reads.size()));
  traffic.set_read_bytes(reads[reads.size() / 2]);
  traffic.set_write_bytes(writes[writes.size() / 2]);
  return traffic;
}

}  // namespace kerneleval::server
