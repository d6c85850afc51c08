// FlashInfer's CUDA FusedAddRMSNorm (in place: residual <- x + r, x <- norm) behind C entry
// points, one per dtype, so that scripts/torch_peers.py can call it through ctypes on torch
// tensors without FlashInfer's JIT. Built by scripts/gpu-bundle.sh from the headers of the
// flashinfer-python wheel (flashinfer/data/include), the same template the wheel compiles at
// run time.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashinfer/norm.cuh"

namespace {

template <typename T>
int FusedAddRmsNorm(void* input, void* residual, void* weight, uint32_t batch, uint32_t hidden,
                    float eps, int enable_pdl, void* stream) {
  return static_cast<int>(flashinfer::norm::FusedAddRMSNorm<T>(
      static_cast<T*>(input), static_cast<T*>(residual), static_cast<T*>(weight), batch, hidden,
      hidden, hidden, eps, enable_pdl != 0, static_cast<cudaStream_t>(stream)));
}

}  // namespace

#define KERNELEVAL_FLASHINFER_ENTRY(name, T)                                                    \
  extern "C" int kerneleval_flashinfer_fused_add_rmsnorm_##name(                                \
      void* input, void* residual, void* weight, uint32_t batch, uint32_t hidden, float eps,    \
      int enable_pdl, void* stream) {                                                           \
    return FusedAddRmsNorm<T>(input, residual, weight, batch, hidden, eps, enable_pdl, stream); \
  }

KERNELEVAL_FLASHINFER_ENTRY(bf16, __nv_bfloat16)
KERNELEVAL_FLASHINFER_ENTRY(fp16, __half)
KERNELEVAL_FLASHINFER_ENTRY(fp32, float)
