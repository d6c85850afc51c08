// Device-side checks of every call of a submitted kernel, run by the service outside the
// timed window (docs/submissions.md, "Evaluation and the checks nobody can game"):
//
// - inputs are a pure function of a seed the kernel cannot know (FillCheckedInput), so the
//   check recomputes them instead of keeping a pristine copy, and nothing on the device holds
//   an expected answer a kernel could look for;
// - the fp64 reference is computed by the check itself from those regenerated inputs (or,
//   for a chained call, from the bytes its hidden_states buffer holds) and compared with the output
//   and residual_out under the request's tolerance;
// - inputs are compared with their regenerated values (unchanged after the call);
// - every tensor is followed by a guard region of seeded random bytes (FillGuard), which a
//   kernel reading past its tensors gets as data and which must be unchanged afterwards.
//
// Every launcher enqueues on `stream` and returns cudaGetLastError(); nothing synchronizes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kerneleval/kernels/call_check.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {

// Writes `elements` values of `dtype` at `data`: element i is a function of (seed, i) only,
// uniform in [-2, 2) on a grid of 2^-14 (exact in every dtype, so the regenerated value
// matches the stored one bit for bit, whatever the compiler does with floating point).
// `scale` (a power of two) multiplies every value, before the rounding.
cudaError_t FillCheckedInput(void* data, std::size_t elements, DType dtype, std::uint64_t seed,
                             cudaStream_t stream, float scale = 1.0f);

// Adds to counts->bad[tensor] the elements of `data` whose bits differ from `pristine`'s
// (first failing element as in CheckCall).
cudaError_t CheckUnchanged(const void* data, const void* pristine, std::size_t elements,
                           DType dtype, CallCheckTensor tensor, CallCheckCounts* counts,
                           cudaStream_t stream);

// Writes `bytes` seeded random bytes at `data` (any alignment).
cudaError_t FillGuard(void* data, std::size_t bytes, std::uint64_t seed, cudaStream_t stream);

// Adds to counts->guard_changed[tensor] the bytes at `data` that differ from FillGuard(seed).
cudaError_t CheckGuard(const void* data, std::size_t bytes, std::uint64_t seed,
                       CallCheckTensor tensor, CallCheckCounts* counts, cudaStream_t stream);

struct CallCheckArgs {
  DType dtype = DType::kBF16;
  Mode mode = Mode::kOutput;
  std::int64_t batch = 0;
  std::int64_t hidden = 0;
  double eps = 1e-6;
  double atol = 0;
  double rtol = 0;
  // What the kernel was given (kInPlace: output == hidden_states, residual_out == residual).
  const void* hidden_states = nullptr;
  const void* residual = nullptr;
  const void* weight = nullptr;
  const void* output = nullptr;
  const void* residual_out = nullptr;  // nullptr for kOutput
  // The seeds FillCheckedInput wrote hidden_states and residual with, and a copy of the weight
  // as the service wrote it.
  std::uint64_t hidden_states_seed = 0;
  std::uint64_t residual_seed = 0;
  const void* pristine_weight = nullptr;
  // hidden_states is another call's output (a chained call, server/device/call_checks.h): the
  // reference reads its values from memory instead of regenerating them from the seed, and
  // it is not compared with anything.
  bool hidden_states_given = false;
};

// Checks one call (see the header comment): counts into `counts` (device memory, zeroed).
cudaError_t CheckCall(const CallCheckArgs& args, CallCheckCounts* counts, cudaStream_t stream);

// IN_PLACE calls chained through one residual buffer (server/device/call_checks.h): call j got
// its own generated hidden_states (`hidden_states_seeds[j]`, in the slot at `slots + j *
// slot_stride`, where it left its output) and the residual buffer as call j - 1 left it
// (generated from `residual_seed` before call 0). The check replays the chain, each stored
// sum rounded once from the fp32 sum as the definition has it, compares every call's output
// with the fp64 reference of its inputs (into counts[j]), and the residual buffer with the
// last call's sum. `state` is [batch, hidden] of the dtype, for the replayed sums.
struct ChainCheckArgs {
  DType dtype = DType::kBF16;
  std::int64_t batch = 0;
  std::int64_t hidden = 0;
  double eps = 1e-6;
  double atol = 0;
  double rtol = 0;
  int calls = 0;
  const unsigned char* slots = nullptr;
  std::size_t slot_stride = 0;
  const std::uint64_t* hidden_states_seeds = nullptr;  // device memory, `calls` of them
  std::uint64_t residual_seed = 0;
  const void* residual = nullptr;
  const void* weight = nullptr;           // what the calls were given
  const void* pristine_weight = nullptr;  // and a copy of what the service wrote
  void* state = nullptr;
};

cudaError_t CheckInPlaceChain(const ChainCheckArgs& args, CallCheckCounts* counts,
                              cudaStream_t stream);

}  // namespace kerneleval
