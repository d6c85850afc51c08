// Naive: one CTA per row, every thread strides over the row one element at a time, a
// shared-memory tree reduction, a second pass over the row that reads x and r again.
// Correct for every dtype, mode and hidden size; the baseline the others should beat.
//
//   kerneleval submit --source naive_block_per_row.cu --entry naive_block_per_row \
//     --block 256 --rows-per-block 1 --dtype bf16 --name naive
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <kerneleval/submission_abi.h>

__device__ __forceinline__ float Load(const void* p, long long i, int dtype) {
  if (dtype == KERNELEVAL_DTYPE_BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dtype == KERNELEVAL_DTYPE_FP16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void Store(void* p, long long i, float v, int dtype) {
  if (dtype == KERNELEVAL_DTYPE_BF16) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  } else if (dtype == KERNELEVAL_DTYPE_FP16) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

extern "C" __global__ void __launch_bounds__(1024) naive_block_per_row(const kerneleval_params p) {
  __shared__ float partial[1024];
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  const long long x0 = row * p.hidden_states_stride;
  const long long r0 = row * p.residual_stride;
  float sum_sq = 0.f;
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float s = Load(p.hidden_states, x0 + i, p.dtype) + Load(p.residual, r0 + i, p.dtype);
    sum_sq += s * s;
  }
  partial[threadIdx.x] = sum_sq;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / static_cast<float>(p.hidden) + p.eps);
  // In place, output aliases hidden_states: each element is read, then written, by the same
  // thread, after the barrier that ended every read of the first pass.
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float s = Load(p.hidden_states, x0 + i, p.dtype) + Load(p.residual, r0 + i, p.dtype);
    if (p.mode != KERNELEVAL_MODE_OUTPUT)
      Store(p.residual_out, row * p.residual_out_stride + i, s, p.dtype);
    Store(p.output, row * p.output_stride + i, s * inv_rms * Load(p.weight, i, p.dtype), p.dtype);
  }
}
