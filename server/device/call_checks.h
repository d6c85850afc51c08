// Every call of a submitted kernel checked, without changing what is measured: the plan of
// a measurement's checks (a function of the protocol and the problem only) and what a
// failed check says. The CUDA backend carries the plan out with the device-side checks of
// kernels/include/kerneleval/kernels/call_check_cuda.h; docs/submissions.md states the rules.
//
// Pure functions except SecretSeed; safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

#include "kerneleval/kernels/call_check.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"

namespace kerneleval::server {

enum class CallCheckTiming {
  // Cold, no graph: every warm-up and timed call gets inputs generated for it alone, outputs
  // and guards written just before it, and is checked right after its stop point, before the
  // next call's L2 flush (which restores the cache state the check left).
  kEveryCall,
  // Hot, or graph replay (one timed sample is many calls): nothing may run between the calls
  // of a window, so each call writes an output slot of its own (output and residual_out,
  // poisoned, guards after each), checked after the window against the fp64 reference.
  // Outside IN_PLACE the calls are chained: a call's hidden_states is the previous call's
  // output (the first call of a batch reads the input set's), and its reference is computed
  // from the bytes that buffer held, so a call that reads its input before its predecessor
  // has written it (a dependent launch that never waits) fails. In IN_PLACE each call's
  // slot holds its own generated hidden_states (where it leaves its output), and the calls
  // share one residual buffer: each reads the sum its predecessor left there, and the check
  // replays that chain of sums (CheckInPlaceChain). The calls share a weight
  // generated in [-1, 1) (a chain under larger weights concentrates each row in a few columns
  // and grows past the tolerances' scale). Calls are checked in batches
  // of `batch_calls`: every graph replay, and in hot replay without a graph as many calls as
  // the slots' memory allows; slots are poisoned again before the next batch.
  kChained,
};

struct CallCheckPlan {
  CallCheckTiming timing = CallCheckTiming::kEveryCall;
  // Outputs compared with the fp64 reference (every protocol, every mode).
  bool check_outputs = true;
  // Inputs compared bit for bit with what the service wrote (every mode but IN_PLACE).
  bool check_inputs = true;
  // Bytes of the guard region after each tensor (hidden_states, residual, weight, output,
  // residual_out).
  std::size_t guard_bytes = 0;
  // Check records to allocate: one per call (kEveryCall), or one per call of a batch and
  // one for the guards of the tensors the batch's calls share (kChained).
  std::size_t records = 0;
  // kChained: calls checked together, each with its own slot of `slot_tensors` tensors of
  // `slot_stride` bytes (guard included; in IN_PLACE only slot 0's second tensor is used,
  // as the residual all calls share).
  std::size_t batch_calls = 0;
  std::size_t slot_tensors = 0;
  std::size_t slot_stride = 0;
};

// A call checked in a kChained batch, for its name: a timed sample's (`sample` counts
// warm-up samples first) or the one launch of a graph right after it is built, and its
// place among the window's `calls`.
struct ChainedCall {
  bool first_launch = false;
  std::uint32_t sample = 0;
  std::uint32_t call = 0;
  std::uint32_t calls = 1;
};

// At least 64 KiB and at least one row of the tensor, so that reading one row past the last
// one stays inside it; a multiple of 256 bytes.
std::size_t GuardBytes(const Problem& problem);

// The plan for `options` (warm-up, repetitions or the adaptive maximum, cold, graph). Hot
// and graph replay's output slots get at most `slot_budget_bytes`: RESOURCE_EXHAUSTED
// naming protocol.graph_calls where one graph replay's slots do not fit, since a replay's
// calls cannot be split (never a call left unchecked).
absl::StatusOr<CallCheckPlan> PlanCallChecks(const Problem& problem, const MeasureOptions& options,
                                             std::size_t slot_budget_bytes);

// Which call a kEveryCall record checked, in words: "warm-up call 3 of 10", "timed call 7 of
// 50".
std::string CheckedCallName(const CallCheckPlan& plan, const MeasureOptions& options,
                            std::size_t record);

// A kChained call in words: "timed call 7 of 50" (hot, no graph), "call 3 of 20 of warm-up
// replay 2 of 10", "call 1 of 20 of the graph's first launch before the timed replays".
std::string ChainedCallName(const MeasureOptions& options, const ChainedCall& call);

// Empty when `counts` passes: outputs within `tolerance` (and its matched ratio) with no
// NaN or Inf, inputs unchanged, guards unchanged. Otherwise the findings, most telling
// first, each naming the tensor and its first failing element ([row, column]) or guard byte.
std::string DescribeCallCheck(const CallCheckCounts& counts, const Problem& problem,
                              const CallCheckPlan& plan, const v1::Tolerance& tolerance);

// Whether checked call `call` (0-based, warm-up included) gets the previous call's inputs
// again instead of its own: about one call in four, drawn from `seed`, and at least one in
// every eight, never the first. The outputs are poisoned before it like before any call, so a
// kernel that skips its work when its inputs repeat leaves the poison behind.
bool RepeatsInputs(std::uint64_t seed, std::uint64_t call);

// A seed no request can predict or repeat: drawn once per process from std::random_device,
// then stepped per call.
std::uint64_t SecretSeed();

// The seed of one tensor of one checked call or input set (splitmix64 of the three).
std::uint64_t CallTensorSeed(std::uint64_t base, std::uint64_t call_or_set, int tensor);

}  // namespace kerneleval::server
