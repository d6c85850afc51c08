#include "server/cuda/cuda_call_checks_runner.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kerneleval/kernels/call_check_cuda.h"
#include "server/device/call_checks.h"

namespace kerneleval::server {
namespace {

std::atomic<CheckRecordsHook> check_records_hook{nullptr};

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

// The device check of a call given `a`: its outputs against the fp64 reference of what it
// read, within the measurement's tolerance. The caller adds the seeds its inputs came from
// and the pristine weight.
CallCheckArgs CheckArgsFor(const CudaWorkspace& w, const FusedAddRmsNormArgs& a) {
  const Problem& p = *w.problem;
  CallCheckArgs args;
  args.dtype = p.dtype;
  args.mode = p.mode;
  args.batch = p.batch;
  args.hidden = p.hidden;
  args.eps = p.eps;
  args.atol = w.checks.tolerance.atol();
  args.rtol = w.checks.tolerance.rtol();
  args.hidden_states = a.hidden_states;
  args.residual = a.residual;
  args.weight = a.weight;
  args.output = a.output;
  args.residual_out = a.residual_out;
  return args;
}

// Writes a checked call's output `tensor` (kCheckOutput or kCheckResidualOut) before the
// call: seeded numbers the call must overwrite.
absl::Status PoisonOutput(CudaWorkspace* w, void* data, std::uint64_t key, CallCheckTensor tensor) {
  // Seeded numbers in [-2, 2), not NaN: a kernel that skips a row whose output "already holds
  // numbers" (or probes one element of it) finds numbers and leaves them, and its check
  // fails; with NaN it would have found nothing to reuse and computed, its trick unseen. An
  // element left unwritten fails all the same, unless the seeded number happens to lie
  // within the tolerance of the answer (about 1% of the time in bf16): a row of them never.
  const Problem& p = *w->problem;
  KE_CUDA_RETURN_IF_ERROR(FillCheckedInput(data, p.TensorElements(), p.dtype,
                                           CallTensorSeed(w->checks.seed, key, tensor), w->stream));
  return absl::OkStatus();
}

// kChained: poisons the slots (IN_PLACE: generates their inputs) and writes their guards.
absl::Status PrepareBatch(CudaWorkspace* w) {
  cudaStream_t stream = w->stream;
  const Problem& p = *w->problem;
  const CudaWorkspace::Checks& c = w->checks;
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

// IN_PLACE batch: the chain of sums replayed (CheckInPlaceChain), and each slot's guard.
absl::Status CheckInPlaceBatch(CudaWorkspace* w, CallCheckCounts* records) {
  cudaStream_t stream = w->stream;
  const Problem& p = *w->problem;
  const CudaWorkspace::Checks& c = w->checks;
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
    KE_CUDA_RETURN_IF_ERROR(CheckGuard(static_cast<unsigned char*>(w->Slot(j, 0)) + p.TensorBytes(),
                                       c.plan.guard_bytes,
                                       GuardSeed(c.plan, c.seed, w->SlotKey(j), kCheckHiddenStates),
                                       kCheckHiddenStates, records + j, stream));
  }
  return absl::OkStatus();
}

// Any other mode: each call of the batch against the reference of what it read, and its
// slot's guards.
absl::Status CheckChainedCalls(CudaWorkspace* w, CallCheckCounts* records) {
  cudaStream_t stream = w->stream;
  const std::size_t bytes = w->problem->TensorBytes();
  const CudaWorkspace::Checks& c = w->checks;
  for (std::size_t j = 0; j < c.pending.size(); ++j) {
    // The set's residual, and the set's hidden_states for the first call of the batch, the
    // previous call's output after it.
    const FusedAddRmsNormArgs a = w->CallArgs(j);
    const std::uint64_t key = w->SlotKey(j);
    const std::uint64_t set = j % w->sets.size();
    CallCheckArgs args = CheckArgsFor(*w, a);
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
  return absl::OkStatus();
}

// What the calls share, into `shared`: the guards of the input sets and of the weight. (The
// inputs themselves are compared by the checks of the calls that read them.)
absl::Status CheckSharedGuards(CudaWorkspace* w, CallCheckCounts* shared) {
  cudaStream_t stream = w->stream;
  const Problem& p = *w->problem;
  const std::size_t bytes = p.TensorBytes();
  const CudaWorkspace::Checks& c = w->checks;
  if (w->in_place) {
    KE_CUDA_RETURN_IF_ERROR(CheckGuard(
        static_cast<unsigned char*>(w->Slot(0, 1)) + bytes, c.plan.guard_bytes,
        GuardSeed(c.plan, c.seed, w->SlotKey(0), kCheckResidual), kCheckResidual, shared, stream));
  }
  KE_CUDA_RETURN_IF_ERROR(CheckGuard(
      static_cast<const unsigned char*>(c.chain_weight.get()) + p.WeightBytes(), c.plan.guard_bytes,
      GuardSeed(c.plan, c.seed, 0, kCheckWeight), kCheckWeight, shared, stream));
  // The workload's weight, which only the result call was given, unchanged since.
  KE_CUDA_RETURN_IF_ERROR(CheckUnchanged(w->weight->get(), c.pristine_weight.get(),
                                         static_cast<std::size_t>(p.hidden), p.dtype, kCheckWeight,
                                         shared, stream));
  for (std::size_t set = 0; set < w->sets.size(); ++set) {
    const FusedAddRmsNormArgs a = w->Args(*w->sets[set]);
    for (const Guarded& g : GuardedEnds(a, bytes, p.WeightBytes())) {
      if (g.tensor == kCheckOutput || g.tensor == kCheckResidualOut) continue;  // unused
      KE_CUDA_RETURN_IF_ERROR(CheckGuard(g.end, c.plan.guard_bytes,
                                         GuardSeed(c.plan, c.seed, set, g.tensor), g.tensor, shared,
                                         stream));
    }
  }
  return absl::OkStatus();
}

// The batch's records read back: the first failed call (or the shared record's findings)
// kept as the measurement's failure, unless an earlier batch already failed.
absl::Status ReadBatchVerdict(const MeasureOptions& options, CudaWorkspace* w) {
  cudaStream_t stream = w->stream;
  const Problem& p = *w->problem;
  CudaWorkspace::Checks& c = w->checks;
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
  return absl::OkStatus();
}

}  // namespace

void SetCheckRecordsHookForTesting(CheckRecordsHook hook) { check_records_hook.store(hook); }

absl::Status PlanCheckedCalls(const Problem& problem, const MeasureOptions& options,
                              CudaWorkspace* w) {
  w->checks.on = options.check_calls;
  if (!w->checks.on) return absl::OkStatus();
  std::size_t free_bytes = 0, total = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
  ASSIGN_OR_RETURN(w->checks.plan, PlanCallChecks(problem, options, free_bytes / 4));
  w->checks.tolerance = options.check_tolerance;
  w->checks.seed = SecretSeed();
  return absl::OkStatus();
}

absl::Status KeepPristineWeight(CudaWorkspace* w) {
  const std::size_t bytes = w->problem->WeightBytes();
  ASSIGN_OR_RETURN(w->checks.pristine_weight, DeviceBuffer::Allocate(bytes));
  KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(w->checks.pristine_weight.get(), w->weight->get(), bytes,
                                          cudaMemcpyDeviceToDevice, w->stream));
  return absl::OkStatus();
}

absl::Status FillInputGuards(const CudaBufferSet& s, CudaWorkspace* w) {
  const Problem& p = *w->problem;
  for (const Guarded& g : GuardedEnds(w->Args(s), p.TensorBytes(), p.WeightBytes())) {
    KE_CUDA_RETURN_IF_ERROR(FillGuard(g.end, w->checks.plan.guard_bytes, SecretSeed(), w->stream));
  }
  return absl::OkStatus();
}

absl::Status WriteCheckedInputs(CudaWorkspace* w, std::size_t set, std::uint64_t key,
                                std::uint64_t guard_key) {
  cudaStream_t stream = w->stream;
  const Problem& p = *w->problem;
  const CudaWorkspace::Checks& c = w->checks;
  CudaBufferSet& s = *w->sets[set];
  const FusedAddRmsNormArgs a = w->Args(s);
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

absl::Status CheckCallOnDevice(CudaWorkspace* w, std::size_t set, std::uint64_t key,
                               std::uint64_t guard_key, std::size_t record) {
  cudaStream_t stream = w->stream;
  const Problem& p = *w->problem;
  CudaWorkspace::Checks& c = w->checks;
  if (record >= c.plan.records) return absl::OkStatus();
  auto* counts = static_cast<CallCheckCounts*>(c.records.get()) + record;
  const FusedAddRmsNormArgs a = w->Args(*w->sets[set]);
  CheckRecordLedger::DeviceSteps steps;
  // After the call on the same stream: whatever its kernels left in the record (a "passed"
  // record pre-set, an earlier call's findings wiped) is overwritten before the check.
  steps.reset = [&]() -> absl::Status {
    KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counts, 0, sizeof(CallCheckCounts), stream));
    return absl::OkStatus();
  };
  steps.check = [&]() -> absl::Status {
    if (c.plan.check_outputs || c.plan.check_inputs) {
      CallCheckArgs args = CheckArgsFor(*w, a);
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
    return absl::OkStatus();
  };
  // Into pageable memory, which no kernel maps (pinned memory is the device's to write
  // through unified addressing), before the next call is queued: the host waits here, after
  // the window's stop point and before the next call's flush, so nothing timed changes.
  steps.read_back = [&](CallCheckCounts* out) -> absl::Status {
    KE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out, counts, sizeof(CallCheckCounts), cudaMemcpyDeviceToHost, stream));
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  return c.ledger.CheckCall(record, steps);
}

absl::Status PrepareCheckedCalls(CudaWorkspace* w) {
  CudaWorkspace::Checks& c = w->checks;
  if (!c.on) return absl::OkStatus();
  cudaStream_t stream = w->stream;
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
  if (CheckRecordsHook hook = check_records_hook.load(); hook != nullptr) hook(*w);
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status CheckBatch(const MeasureOptions& options, CudaWorkspace* w, bool again) {
  CudaWorkspace::Checks& c = w->checks;
  if (c.pending.empty()) return absl::OkStatus();
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c.records.get(), 0, c.records.bytes(), w->stream));
  auto* records = static_cast<CallCheckCounts*>(c.records.get());
  if (w->in_place) {
    RETURN_IF_ERROR(CheckInPlaceBatch(w, records));
  } else {
    RETURN_IF_ERROR(CheckChainedCalls(w, records));
  }
  // What the calls share, in the batch's last record.
  RETURN_IF_ERROR(CheckSharedGuards(w, records + c.plan.batch_calls));
  RETURN_IF_ERROR(ReadBatchVerdict(options, w));
  c.checked += c.pending.size();
  c.pending.clear();
  ++c.batches;
  if (again) RETURN_IF_ERROR(PrepareBatch(w));
  return absl::OkStatus();
}

absl::Status FinishCheckedCalls(const MeasureOptions& options, CudaWorkspace* w, Measurement* m) {
  CudaWorkspace::Checks& c = w->checks;
  if (!c.on) return absl::OkStatus();
  cudaStream_t stream = w->stream;
  if (c.plan.timing == CallCheckTiming::kChained) {
    RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/false));
    c.finished = true;
    m->calls_checked = static_cast<std::uint32_t>(std::min<std::uint64_t>(c.checked, ~0u));
    m->call_check_failure = c.failure;
    return absl::OkStatus();
  }
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const CheckRecordLedger& ledger = c.ledger;
  m->calls_checked = static_cast<std::uint32_t>(ledger.used());
  for (std::size_t i = 0; i < ledger.used(); ++i) {
    const std::string found =
        ledger.read(i) ? DescribeCallCheck(ledger.record(i), *w->problem, c.plan, c.tolerance)
                       : "its check never ran";
    if (found.empty()) continue;
    m->call_check_failure = absl::StrCat(CheckedCallName(c.plan, options, i), ": ", found);
    break;
  }
  return absl::OkStatus();
}

}  // namespace kerneleval::server
