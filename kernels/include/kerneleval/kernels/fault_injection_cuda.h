// Test-only: a kernel that writes through an invalid pointer, so that tests can show how
// a service survives a sticky CUDA fault (cudaErrorIllegalAddress) on a real GPU. Nothing
// in the operation's own code paths calls it.
#pragma once

#include <cuda_runtime_api.h>

namespace kerneleval {

// Returns the launch's error; the fault itself surfaces at the next synchronization.
cudaError_t LaunchIllegalAddressFault(cudaStream_t stream);

}  // namespace kerneleval
