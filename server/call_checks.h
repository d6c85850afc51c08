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

#include "kerneleval/kernels/call_check.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/backend.h"

namespace kerneleval::server {

enum class CallCheckTiming {
  // Cold, no graph: every warm-up and timed call gets inputs generated for it alone, outputs
  // and guards written just before it, and is checked right after its stop point, before the
  // next call's L2 flush (which restores the cache state the check left).
  kEveryCall,
  // Hot, or graph replay (one timed sample is many calls): anything run between calls would
  // change the cache state the protocol measures, so each input set gets its own inputs,
  // poisoned outputs and guards before the warm-up, and the last call into each set is checked
  // after the timed window.
  kAfterWindow,
};

struct CallCheckPlan {
  CallCheckTiming timing = CallCheckTiming::kEveryCall;
  // Outputs compared with the fp64 reference. After the window in IN_PLACE they cannot be:
  // each call's inputs were the previous call's outputs.
  bool check_outputs = true;
  // Inputs compared bit for bit with what the service wrote (every mode but IN_PLACE).
  bool check_inputs = true;
  // Bytes of the guard region after each tensor (hidden_states, residual, weight, output,
  // residual_out).
  std::size_t guard_bytes = 0;
  // Check records to allocate: one per call (kEveryCall) or per input set (kAfterWindow).
  std::size_t records = 0;
};

// At least 64 KiB and at least one row of the tensor, so that reading one row past the last
// one stays inside it; a multiple of 256 bytes.
std::size_t GuardBytes(const Problem& problem);

// The plan for `options` (warm-up, repetitions or the adaptive maximum, cold, graph) on
// `input_sets` rotated input sets.
CallCheckPlan PlanCallChecks(const Problem& problem, const MeasureOptions& options,
                             std::size_t input_sets);

// Which call a record checked, in words: "warm-up call 3 of 10", "timed call 7 of 50", or
// "the last call into input set 2 of 4 (checked after the timed window)".
std::string CheckedCallName(const CallCheckPlan& plan, const MeasureOptions& options,
                            std::size_t record);

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
