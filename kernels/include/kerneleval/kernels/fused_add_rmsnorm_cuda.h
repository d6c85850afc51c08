// CUDA entry points for fused residual-add + RMSNorm. Same contract as fused_add_rmsnorm.h;
// pointers are device memory of the current device. Launchers never synchronize and never
// abort: they return the launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {

// The project's fused kernel. One launcher picks the variant by (dtype, hidden, batch,
// alignment): a latency path for small batches and a bandwidth path for large ones; any
// hidden size and unaligned pointers take a correct (slower) path.
cudaError_t LaunchFusedAddRmsNorm(const FusedAddRmsNormArgs& args, cudaStream_t stream);

// Name of the variant LaunchFusedAddRmsNorm would pick for these arguments (for reports).
const char* FusedAddRmsNormVariant(const FusedAddRmsNormArgs& args);

// The unfused two-kernel baseline (what eager PyTorch does): kernel 1 writes the rounded
// sum to `scratch` ([batch, hidden] of the dtype; in the residual buffer's place for modes
// that write residual_out), kernel 2 normalizes it.
cudaError_t LaunchUnfusedAddRmsNorm(const FusedAddRmsNormArgs& args, void* scratch,
                                    cudaStream_t stream);

}  // namespace kerneleval
