// A device backend: runs one implementation of the operation on one device under a
// measurement protocol. The CPU and CUDA backends implement it; the service, the device
// workers and the benchmark engine only see this interface.
//
// Thread-safety: a backend is driven by exactly one device worker thread; Describe(),
// Implementations(), ReadClocks(), Healthy() and the version getters may be called from
// any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/protocol.h"
#include "common/submission_id.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::server {

// Shape and parameters of one call of the operation.
struct Problem {
  DType dtype = DType::kBF16;
  Mode mode = Mode::kOutput;
  std::int64_t batch = 0;
  std::int64_t hidden = 0;
  float eps = 1e-6f;

  // Elements and bytes of one [batch, hidden] tensor (hidden_states, residual, output, ...).
  std::size_t TensorElements() const {
    return static_cast<std::size_t>(batch) * static_cast<std::size_t>(hidden);
  }
  std::size_t TensorBytes() const { return TensorElements() * ElementSize(dtype); }
  std::size_t WeightBytes() const { return static_cast<std::size_t>(hidden) * ElementSize(dtype); }
};

// Host-side inputs; the memory is owned by the caller and outlives the call.
struct HostInputs {
  const void* hidden_states = nullptr;
  const void* residual = nullptr;
  const void* weight = nullptr;
};

// Where the first call's results go (host memory owned by the caller, TensorBytes() each).
// residual_out is ignored for Mode::kOutput. Null pointers: results are not copied back.
struct HostOutputs {
  void* output = nullptr;
  void* residual_out = nullptr;
};

struct AdaptiveOptions {
  bool enabled = false;
  std::uint32_t min_samples = ProtocolDefaults::kAdaptiveMinSamples;
  std::uint32_t max_samples = ProtocolDefaults::kAdaptiveMaxSamples;
  double target_relative_spread = ProtocolDefaults::kAdaptiveTargetSpread;
  double max_seconds = ProtocolDefaults::kAdaptiveMaxSeconds;
};

// How to time: a resolved protocol as a backend reads it (server/device/measure_options.h
// converts), its defaults those of common/protocol.h, the benchmark's; Run uses warmup 0,
// repetitions 1, hot.
struct MeasureOptions {
  std::uint32_t warmup = ProtocolDefaults::kWarmup;
  std::uint32_t repetitions = ProtocolDefaults::kRepetitions;
  AdaptiveOptions adaptive;
  // Flush caches before every timed call, outside the window (CACHE_MODE_COLD, the default);
  // a backend has only the two modes, so the cache mode is a flag here.
  bool cold = ProtocolDefaults::kCache == v1::CACHE_MODE_COLD;
  bool graph = false;  // CUDA-graph replay of graph_calls calls per sample
  std::uint32_t graph_calls = ProtocolDefaults::kGraphCalls;
  bool rotate_inputs = false;  // rotate among input copies larger than the last-level cache
  v1::Timer timer = v1::TIMER_UNSPECIFIED;  // unspecified = best available
  // Also count DRAM bytes per call (CUPTI range profiler) in windows after the timed ones.
  bool measure_dram_bytes = false;
  // Also profile each kernel of a call (CUPTI range profiler) in passes after the timed
  // windows (v1::Protocol.profile); CUDA devices only.
  bool profile = false;
  // Submitted kernels: every warm-up and timed call checked on the device against the fp64
  // reference under `check_tolerance`, inputs and the guard regions after every tensor
  // checked unchanged (server/device/call_checks.h). Backends that run no submitted code ignore
  // it.
  bool check_calls = false;
  v1::Tolerance check_tolerance;  // resolved
  // Polled between samples; returning true stops the measurement early.
  std::function<bool()> should_stop;
  // The owner a submitted kernel runs for (Caller::owner), empty for built-ins: a GPU runs
  // each owner's submissions in a host of that owner's alone (server/device/tenant_backend.h).
  std::string tenant;
};

struct Measurement {
  std::vector<double> samples_seconds;  // per call
  v1::Timer timer = v1::TIMER_UNSPECIFIED;
  std::string timer_note;  // e.g. why CUPTI was not used
  bool stopped_early = false;
  // Wall-clock split of the call (Run's timing): inputs to the device, the warm-up and
  // timed calls, results back. Backends without a device copy report 0 for the copies.
  double host_to_device_seconds = 0;
  double device_seconds = 0;
  double device_to_host_seconds = 0;
  // A device in another process: the round trip to it less the three above (0 in-process).
  double device_host_seconds = 0;
  // Filled by backends that have them (GPUs with NVML / CUPTI); empty elsewhere.
  v1::ClockSummary clocks;       // sampled while the timed samples ran
  v1::ClockAdmission admission;  // the wait before them
  // Per call, when measure_dram_bytes: read_bytes / write_bytes / windows / cold, or
  // available = false with the reason. Declared bytes and checks are the engine's.
  v1::DramTraffic dram;
  // With check_calls: how many calls (or input sets, after the window) were checked, and
  // the first failed check naming its call, empty when all passed.
  std::uint32_t calls_checked = 0;
  std::string call_check_failure;
  // With the CUPTI timer: the timed samples' kernels by their place in the call.
  std::vector<v1::KernelTiming> kernels;
  // With profile: each kernel's launch and counters and the device's limits, or available =
  // false with the reason. The figures are the engine's (server/figures/kernel_profile.h).
  v1::ProfileReport profile;
};

// A registered submission ready to load: its record (id, launch plan, dtype, mode) and the
// cubin compiled for the device's architecture.
struct SubmittedKernel {
  v1::Submission submission;
  std::string cubin;
  // The owner of the request that runs it (the caller's, never read from the id: two owners
  // who register the same source get the same id). Its code runs in that owner's host.
  std::string tenant;
};

// The wire description of a backend's implementations (the first is the default). `Impl`
// has `name`, `description` and `test_only`.
template <typename Impl>
std::vector<v1::Implementation> DescribeImplementations(const std::vector<Impl>& impls,
                                                        const char* device_kind) {
  std::vector<v1::Implementation> out;
  for (std::size_t i = 0; i < impls.size(); ++i) {
    v1::Implementation impl;
    impl.set_name(impls[i].name);
    impl.set_description(impls[i].description);
    impl.set_device_kind(device_kind);
    impl.set_is_default(i == 0);
    impl.set_test_only(impls[i].test_only);
    out.push_back(std::move(impl));
  }
  return out;
}

// What a device can do: the one answer to every "does this device support that?" question
// (request admission, the device workers, the backends themselves). A device's kind decides
// it; what one machine lacks at run time (CUPTI not loadable, counters not permitted) is
// found when a measurement asks for it and reported with the result or refused then.
struct Capabilities {
  std::string kind;  // "cpu" or "cuda"
  bool gpu = false;  // a CUDA device
  // The timers protocol.timer may name, best first (TIMER_UNSPECIFIED picks the best that
  // works; TIMER_CUPTI may still be unavailable on a machine without CUPTI).
  std::vector<v1::Timer> timers;
  bool graph_replay = false;  // protocol.cuda_graph
  bool call_checks = false;   // protocol.check_every_call, and so submitted kernels
  bool submissions = false;   // runs submitted kernels (in a device host of their owner)
  bool profiles = false;      // protocol.profile (hardware counters, where readable)

  bool SupportsTimer(v1::Timer timer) const;
};

// The capabilities of a device of `kind` ("cpu", "cuda"; anything else supports nothing).
Capabilities CapabilitiesOfKind(absl::string_view kind);

// The refusals of what a device cannot do, one wording each; `device` names the device and
// `field` the request field. OK when the device supports it (or it is not asked for).
absl::Status CheckTimer(const Capabilities& caps, v1::Timer timer, const std::string& device,
                        absl::string_view field);
// What a protocol asks of its device beyond plain timing.
struct ProtocolNeeds {
  bool graph = false;        // protocol.cuda_graph
  bool check_calls = false;  // protocol.check_every_call
  bool profile = false;      // protocol.profile
  v1::Timer timer = v1::TIMER_UNSPECIFIED;
};
absl::Status CheckProtocolFits(const Capabilities& caps, const ProtocolNeeds& needs,
                               const std::string& device);
// FAILED_PRECONDITION where the device has no counters to profile kernels with.
absl::Status CheckProfile(const Capabilities& caps, const std::string& device,
                          absl::string_view field);
// FAILED_PRECONDITION where the device runs no submitted code.
absl::Status CheckSubmissions(const Capabilities& caps, const std::string& submission_id,
                              const std::string& device, absl::string_view field);

// Each backend declares its overrides in full, the same lines in each: C++ inherits no
// declarations, and one shared list would be a macro hiding which defaults a backend keeps.
class Backend {
 public:
  virtual ~Backend() = default;

  // Name used in requests and labels: "cpu", "cpu:1", "cuda:0", ...
  virtual const std::string& name() const = 0;
  virtual v1::Device Describe() const = 0;
  virtual std::vector<v1::Implementation> Implementations() const = 0;
  // What the device can do: computed from Describe()'s kind on the first question and kept
  // (Describe() builds a whole message); any thread may ask.
  const Capabilities& capabilities() const;
  // "cpu" or "cuda": what the device is, as Describe() says, never parsed from its name.
  const std::string& kind() const { return capabilities().kind; }
  bool IsGpu() const { return capabilities().gpu; }
  bool HasImplementation(const std::string& impl) const;
  std::string DefaultImplementation() const;

  // One-time preparation before the device takes traffic: context creation, kernel
  // module load, copy-bandwidth measurement. Readiness waits for it.
  virtual absl::Status WarmUp() = 0;

  // Runs `impl` once on `inputs` writing `outputs` (the result callers see), then times it
  // under `options` on private copies. Inputs are never modified.
  virtual absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                              const HostOutputs& outputs, const std::string& impl,
                                              const MeasureOptions& options) = 0;

  // Makes `kernel` runnable as implementation kernel.submission.id() on this device. Only a
  // GPU's device host process loads submitted code (a fault ends that process, never the
  // server); the default refuses with FAILED_PRECONDITION.
  virtual absl::Status AddSubmission(const SubmittedKernel& kernel);

  // Device-to-device (or memcpy) copy bandwidth in bytes/s, read + write counted; measured
  // during WarmUp (0 before).
  virtual double MeasuredCopyBandwidth() const = 0;

  // Host memory that many calls will copy from and to (a device host's shared region): the
  // CUDA backend page-locks it so that those copies run at DMA speed. Best effort.
  virtual void PinHostMemory(void* data, std::size_t bytes) {
    (void)data;
    (void)bytes;
  }
  virtual void UnpinHostMemory(void* data) { (void)data; }

  // Clocks, power and throttle state now; `available` false where the device has none.
  virtual v1::Clocks ReadClocks(bool* available) = 0;

  // Versions for reports ("" when not applicable).
  virtual std::string DriverVersion() const { return ""; }
  virtual std::string RuntimeVersion() const { return ""; }
  virtual std::string TimerStatus() const { return ""; }

  // False after a device fault until Recover() succeeds.
  virtual bool Healthy() const { return true; }
  // Rebuilds the device after a fault (context reset, buffers, warm-up). Called by the
  // worker thread when Healthy() turned false; queued jobs wait for it.
  virtual absl::Status Recover() { return absl::OkStatus(); }

  // Set by the device worker; backends call ReportFault() the moment they find a fault,
  // before the failed call answers its caller, so that readiness drops first.
  void set_fault_listener(std::function<void()> listener) { fault_listener_ = std::move(listener); }

 protected:
  void ReportFault() const {
    if (fault_listener_) fault_listener_();
  }

 private:
  std::function<void()> fault_listener_;
  mutable std::once_flag capabilities_once_;
  mutable Capabilities capabilities_;
};

}  // namespace kerneleval::server
