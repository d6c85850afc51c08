// One implementation a CUDA device can measure: a launch function and what the backend must
// know to run it (scratch, test-only, submitted, fresh module state). The built-ins are
// listed by BuiltinCudaImplementations (server/cuda/cuda_backend.h).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"

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
  // A submission's module image, for a profile's source lines (its line table); null for
  // the built-ins.
  std::shared_ptr<const std::string> cubin;
};

}  // namespace kerneleval::server
