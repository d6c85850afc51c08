// One measurement's device state on a CUDA device: its input sets, events, staged copies,
// the state of its checked calls, and the arguments of each call. Lives for one Measure, on
// the device's worker thread; the CUPTI lease of the measurement outlives it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kerneleval/kernels/call_check.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "server/cuda/check_record_ledger.h"
#include "server/cuda/cuda_buffer_set.h"
#include "server/cuda/cuda_implementation.h"
#include "server/cuda/cuda_resources.h"
#include "server/cuda/cupti_timer.h"
#include "server/device/backend.h"
#include "server/device/call_checks.h"

namespace kerneleval::server {

struct CudaWorkspace {
  const Problem* problem = nullptr;
  const CudaImplementation* impl = nullptr;
  cudaStream_t stream = nullptr;         // the device's
  const DeviceBuffer* weight = nullptr;  // the kept weight (CudaInputBuffers::Prepare)
  bool in_place = false;
  bool writes_residual = false;
  std::vector<CudaBufferSet> rotation;  // sets beyond the kept one, this measurement only
  std::vector<CudaBufferSet*> sets;     // kept set first
  CudaEvent start, stop;
  // Staged tensors (CudaInputBuffers): where the result call's copies back land, and the
  // event that marks them done.
  unsigned char* staged_output = nullptr;
  unsigned char* staged_residual_out = nullptr;
  CudaEvent copied;
  std::uint32_t calls = 1;    // per sample: graph_calls in graph replay
  std::size_t next = 0;       // the set of the next timed call
  std::uint32_t samples = 0;  // timed samples so far, warm-up included
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
    // kEveryCall: each record as read back right after its call's check; only these copies
    // are judged (a record on the device is the submission's to overwrite).
    CheckRecordLedger ledger;
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

  // The call on set `s` with the kept weight.
  FusedAddRmsNormArgs Args(const CudaBufferSet& s) const;
  // Call `position` of a window: a rotation set's (`position` is the set), or, chained,
  // slot `position`'s (server/device/call_checks.h).
  FusedAddRmsNormArgs CallArgs(std::size_t position) const;
  void* Scratch(std::size_t position) const {
    return sets[Chained() ? position % sets.size() : position]->scratch.get();
  }
  // Launches call `position` (CallArgs) on the stream.
  absl::Status Launch(std::size_t position) const;
};

}  // namespace kerneleval::server
