// What the device-side check of one call of a submitted kernel found (call_check_cuda.h).
// Plain data with no CUDA dependency, so that the service reads it on any build.
#pragma once

namespace kerneleval {

// The tensors a call touches, in the order the counts below use.
enum CallCheckTensor : int {
  kCheckHiddenStates = 0,
  kCheckResidual = 1,
  kCheckWeight = 2,
  kCheckOutput = 3,
  kCheckResidualOut = 4,
  kCheckTensors = 5,
};

// One check's findings, in device memory zeroed before the check. `bad` counts, for the
// output and residual_out, elements outside the tolerance or not finite (`nonfinite` of
// them), and for the inputs, elements that differ bit for bit from what the service wrote
// before the call. `guard_changed` counts bytes of the guard region after each tensor that
// are not what the service wrote there. The first failing element or byte of each is kept
// as its bitwise complement, largest first (~index: 0 means none), so that a zeroed record
// needs no other initial value and atomicMax keeps the lowest index.
struct CallCheckCounts {
  unsigned long long bad[kCheckTensors];
  unsigned long long nonfinite[kCheckTensors];
  unsigned long long first_bad_complement[kCheckTensors];
  unsigned long long guard_changed[kCheckTensors];
  unsigned long long first_guard_complement[kCheckTensors];
};

}  // namespace kerneleval
