// FlashInfer's CUDA FusedAddRMSNorm (in place: residual <- x + r, x <- norm) behind a C entry
// point, so that scripts/torch_peers.py can call it through ctypes on torch tensors without
// FlashInfer's JIT. Built by scripts/gpu-bundle.sh from the headers of the flashinfer-python
// wheel (flashinfer/data/include), the same template the wheel compiles at run time.
#include <cstdint>

#include "flashinfer/norm.cuh"

extern "C" int kerneleval_flashinfer_fused_add_rmsnorm_bf16(void* input, void* residual,
                                                            void* weight, uint32_t batch,
                                                            uint32_t hidden, float eps,
                                                            int enable_pdl, void* stream) {
  return static_cast<int>(flashinfer::norm::FusedAddRMSNorm<__nv_bfloat16>(
      static_cast<__nv_bfloat16*>(input), static_cast<__nv_bfloat16*>(residual),
      static_cast<__nv_bfloat16*>(weight), batch, hidden, hidden, hidden, eps, enable_pdl != 0,
      static_cast<cudaStream_t>(stream)));
}
