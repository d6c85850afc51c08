// The CUDA backend: one GPU, one stream, owned by the device's worker thread. Times kernels
// with CUPTI activity records where available (CUPTI attached for that measurement only),
// CUDA events otherwise; flushes L2 by reading twice its size outside the timed window;
// replays CUDA graphs on request; waits for a settled SM clock before timing, samples the
// clocks while timing, and counts DRAM bytes on request.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "kerneleval/kernels/call_check.h"
#include "server/backend.h"
#include "server/cuda_resources.h"
#include "server/cupti_timer.h"
#include "server/kept_buffers.h"

namespace kerneleval::server {

struct CudaImplementation {
  std::string name;
  std::string description;
  bool needs_scratch = false;
  std::function<cudaError_t(const FusedAddRmsNormArgs&, void* scratch, cudaStream_t)> launch;
  bool test_only = false;  // runs only when a request names it; never launched by WarmUp
  // A registered submission: never listed (its owner reaches it through the registry, not
  // the device's list) and never run without every call checked.
  bool submitted = false;
  // Fresh module state (submissions: the module loaded again), called before each phase
  // of a measurement (the result call and warm-up, the timed calls): a kernel cannot carry
  // a count or a copy of its inputs from one phase, or one Measure, into the next. Empty
  // for the built-ins, which keep no state.
  std::function<absl::Status()> reset;
};

// cuda_fused (the default) and cuda_unfused (the two-kernel baseline).
std::vector<CudaImplementation> BuiltinCudaImplementations();

// fault_illegal_address: test-only, writes through an invalid pointer (a sticky fault).
CudaImplementation FaultInjectionImplementation();

// lazy_half_rows: test-only, the reward hack DRAM counters exist to catch. Computes every
// row the first time it sees an output buffer and shape, and only the first half of the
// rows on later calls into the same buffer (the rest still holds the earlier results), so
// its outputs pass the correctness check while its timed calls do half the work.
CudaImplementation LazyHalfRowsImplementation();

class CudaBackend final : public Backend {
 public:
  static int DeviceCount();  // 0 when the runtime finds no device or no driver

  explicit CudaBackend(int ordinal,
                       std::vector<CudaImplementation> impls = BuiltinCudaImplementations());

  const std::string& name() const override { return name_; }
  v1::Device Describe() const override;
  std::vector<v1::Implementation> Implementations() const override;
  absl::Status WarmUp() override;
  absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                      const HostOutputs& outputs, const std::string& impl,
                                      const MeasureOptions& options) override;
  double MeasuredCopyBandwidth() const override { return copy_bandwidth_.load(); }
  v1::Clocks ReadClocks(bool* available) override;
  void PinHostMemory(void* data, std::size_t bytes) override;
  void UnpinHostMemory(void* data) override;
  std::string DriverVersion() const override;
  std::string RuntimeVersion() const override;
  std::string TimerStatus() const override;
  bool Healthy() const override { return healthy_.load(); }
  // Lets AddSubmission load submitted code: set in a device host process only, where a
  // submission's fault ends that process and not the server.
  void AllowSubmissions() { submissions_allowed_ = true; }
  // Loads the cubin and registers it as a test-only implementation named by its id
  // (server/cuda_backend_submissions.cc).
  absl::Status AddSubmission(const SubmittedKernel& kernel) override;
  absl::Status Recover() override;

 private:
  struct BufferSet {
    DeviceBuffer x, r, out, res, scratch;
  };
  struct Workspace;  // one measurement's buffer sets, events and graph (cuda_backend.cc)

  // MeasureOnDevice's steps, in order.
  absl::StatusOr<Measurement> MeasureOnDevice(const Problem& problem, const HostInputs& inputs,
                                              const HostOutputs& outputs,
                                              const CudaImplementation& impl,
                                              const MeasureOptions& options);
  absl::StatusOr<v1::Timer> ResolveTimer(const MeasureOptions& options) const;
  absl::Status PrepareInputs(const Problem& problem, const HostInputs& inputs,
                             const MeasureOptions& options, Workspace* w);
  // `copy_back_seconds`: the copies of the results to `outputs` (0 when there are none).
  absl::StatusOr<double> RunResultCall(const HostOutputs& outputs, bool timed, Workspace* w,
                                       double* copy_back_seconds);
  absl::Status BuildGraph(const MeasureOptions& options, Workspace* w);
  absl::Status Admit(v1::ClockAdmission* admission);
  absl::StatusOr<double> TimedCall(const MeasureOptions& options, v1::Timer timer,
                                   const CuptiLease& lease, Workspace* w);
  absl::StatusOr<double> TimeOneCall(const MeasureOptions& options, v1::Timer timer,
                                     const CuptiLease& lease, Workspace* w, std::size_t set);
  // The checks of a submitted kernel's calls (server/call_checks.h), in order.
  absl::Status PrepareCheckedCalls(Workspace* w);
  // `key` names the inputs (their seeds), `guard_key` the guards' contents.
  absl::Status WriteCheckedInputs(Workspace* w, std::size_t set, std::uint64_t key,
                                  std::uint64_t guard_key);
  // Writes a checked call's output `tensor` (kCheckOutput or kCheckResidualOut) before
  // the call: seeded numbers the call must overwrite.
  absl::Status PoisonOutput(Workspace* w, void* data, std::uint64_t key, CallCheckTensor tensor);
  absl::Status CheckCallOnDevice(Workspace* w, std::size_t set, std::uint64_t key,
                                 std::uint64_t guard_key, std::size_t record);
  // Hot and graph replay (kChained): poisons the slots (IN_PLACE: generates their inputs)
  // and writes their guards; checks the calls launched since, then prepares the slots
  // again when `again`.
  absl::Status PrepareBatch(Workspace* w);
  absl::Status CheckBatch(const MeasureOptions& options, Workspace* w, bool again);
  absl::Status FinishCheckedCalls(const MeasureOptions& options, Workspace* w, Measurement* m);
  // Before the first timed sample: fresh module state for submitted code (its reset), and
  // the graph built again on it.
  absl::Status StartTimedPhase(const MeasureOptions& options, Workspace* w);
  v1::DramTraffic CountDramBytes(const MeasureOptions& options, CuptiLease* lease, Workspace* w);

  // `position`: the input set, or with chained checks the slot (Workspace::CallArgs).
  absl::Status Launch(Workspace* w, std::size_t position);
  absl::Status Enqueue(const MeasureOptions& options, Workspace* w, std::size_t position);
  absl::Status FlushL2(const MeasureOptions& options);
  absl::Status CloseGate();
  void OpenGate();
  // Copies small tensors into staging_ for PrepareInputs; `staged` is left as is where
  // they do not fit.
  absl::Status StageInputs(const Problem& problem, const HostInputs& inputs, Workspace* w,
                           HostInputs* staged);
  absl::Status MeasureCopyBandwidth();

  const int ordinal_;
  const std::string name_;
  std::vector<CudaImplementation> impls_;  // grows only by AddSubmission, in a device host
  bool submissions_allowed_ = false;
  v1::Device static_info_;
  std::atomic<double> copy_bandwidth_{0};
  std::atomic<bool> healthy_{true};
  CudaStream stream_;
  DeviceBuffer flush_;                // 2 x L2, read before cold calls
  DeviceBuffer flush_sink_;           // the flush kernel's never-taken store
  unsigned flush_calls_ = 0;          // FlushL2 cycles the flush's grid with it
  DeviceBuffer gate_flag_;            // the stream gate of hot event-timed calls ...
  CudaStream gate_stream_;            // ... and the stream that opens it
  std::uint8_t gate_generation_ = 0;  // the last gate's; each waits for its own value
  // Page-locked staging for the tensors of small calls (StageInputs), kept between calls.
  PinnedBuffer staging_;
  // The weight and first input set of the last call, kept for the next one where they are
  // large enough: cudaMalloc and cudaFree (which waits for the device) cost several times a
  // small kernel, on the path of every Run. Where a call needs other sizes, the buffers it
  // does not use wait in kept_buffers_ for the next call of their size, so that a workload
  // measured again runs on the buffers it ran on before (server/kept_buffers.h).
  DeviceBuffer kept_weight_;
  BufferSet kept_set_;
  KeptBuffers<DeviceBuffer> kept_buffers_;
};

}  // namespace kerneleval::server
