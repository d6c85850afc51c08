// The honest row computation the planted cheats start from (the naive example's), so that
// each cheat differs from a correct kernel only in its trick.
#pragma once

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

// This thread's share of row `row`'s sum of squares of hidden_states + residual.
__device__ __forceinline__ float RowSumOfSquares(const kerneleval_params& p, long long row) {
  const long long x0 = row * p.hidden_states_stride;
  const long long r0 = row * p.residual_stride;
  float sum_sq = 0.f;
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float s = Load(p.hidden_states, x0 + i, p.dtype) + Load(p.residual, r0 + i, p.dtype);
    sum_sq += s * s;
  }
  return sum_sq;
}

// The row's 1 / rms from every thread's share (one CTA of at most 1024 threads).
__device__ __forceinline__ float RowInvRms(const kerneleval_params& p, float sum_sq) {
  __shared__ float partial[1024];
  partial[threadIdx.x] = sum_sq;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return rsqrtf(partial[0] / static_cast<float>(p.hidden) + p.eps);
}

// Writes row `row`'s outputs (and residual_out) with the given 1 / rms.
__device__ __forceinline__ void WriteRow(const kerneleval_params& p, long long row, float inv_rms) {
  const long long x0 = row * p.hidden_states_stride;
  const long long r0 = row * p.residual_stride;
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float s = Load(p.hidden_states, x0 + i, p.dtype) + Load(p.residual, r0 + i, p.dtype);
    if (p.mode != KERNELEVAL_MODE_OUTPUT)
      Store(p.residual_out, row * p.residual_out_stride + i, s, p.dtype);
    Store(p.output, row * p.output_stride + i, s * inv_rms * Load(p.weight, i, p.dtype), p.dtype);
  }
}

// One CTA (of at most 1024 threads) computes row `row` correctly.
__device__ __forceinline__ void HonestRow(const kerneleval_params& p, long long row) {
  WriteRow(p, row, RowInvRms(p, RowSumOfSquares(p, row)));
}
