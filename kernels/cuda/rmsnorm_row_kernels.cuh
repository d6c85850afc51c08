// The row kernels for what SplitRowKernel does not take: short rows, several to a CTA, and
// unaligned rows in registers (RowKernel); rows too long for registers, or unaligned long
// rows, in two passes (TwoPassKernel). RowKernel is also the second kernel of the unfused
// baseline (RowOp::kNorm).
#pragma once

#include "rmsnorm_primitives.cuh"

namespace kerneleval::cuda_detail {

// Short rows (fewer than 256 16-byte vectors) and unaligned rows: one row per group of
// threads_per_row threads, rows_per_cta groups per CTA; thread `lane` of a group owns the
// units lane + j * threads_per_row (j < kVecsPerThread) of its row and issues every load of
// the row (x, r and the weight) before the first use. The launcher gives each row block its
// own CTA; with a smaller grid (a batch past the launch limit, or the tests' max_ctas) a CTA
// walks row blocks with a grid stride.
//
// In-place safety: every element is read and written by the same thread, and a thread reads
// a row completely before it writes any of it, so output may alias x and sum_out may alias r.
//
// Registers: at one vector per thread the kernel fits 32 registers (8 CTAs of 256 threads
// per SM); left alone, ptxas for sm_90a takes 48. At two vectors per thread it fits 48
// without spilling (10 CTAs of 128).
template <int kVecsPerThread>
constexpr int RowKernelRegisters() {
  return kVecsPerThread == 1 ? 32 : kVecsPerThread == 2 ? 48 : 64;
}

template <typename T, int kElems, int kVecsPerThread, RowOp kOp>
__global__ void __launch_bounds__(kMaxThreads) __maxnreg__((RowKernelRegisters<kVecsPerThread>()))
    RowKernel(const RowParams p) {
  using P = Vec<T, kElems>;
  constexpr bool kHasResidual = kOp != RowOp::kNorm;
  __shared__ float partials[2][kMaxThreads / kWarp];

  PdlWaitAndRelease();
  const int tpr = p.threads_per_row;
  const int group = threadIdx.x / tpr;
  const int lane = threadIdx.x - group * tpr;
  const auto* x = static_cast<const P*>(p.x);
  const auto* r = static_cast<const P*>(p.r);
  const auto* w = static_cast<const P*>(p.w);
  auto* out = static_cast<P*>(p.out);
  auto* sum_out = static_cast<P*>(p.sum_out);

  bool valid[kVecsPerThread];
#pragma unroll
  for (int j = 0; j < kVecsPerThread; ++j) valid[j] = lane + j * tpr < p.units;

  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * p.rows_per_cta;
  int parity = 0;
  for (std::int64_t block_row = static_cast<std::int64_t>(blockIdx.x) * p.rows_per_cta;
       block_row < p.batch; block_row += step) {
    const std::int64_t row = block_row + group;
    const bool in_range = row < p.batch;
    const std::int64_t base = row * p.units + lane;
    P xc[kVecsPerThread];
    P rc[kVecsPerThread];
    P wv[kVecsPerThread];
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      const bool load = in_range && valid[j];
      xc[j] = load ? Load(x + base + j * tpr) : P{};
      if constexpr (kHasResidual) rc[j] = load ? Load(r + base + j * tpr) : P{};
      wv[j] = valid[j] ? LoadReused(w + lane + j * tpr) : P{};
    }

    // The fp32 sum is formed twice, here and at the store, rather than kept: holding it
    // across the barrier costs registers that the packed inputs do not.
    auto sum_at = [&](int j, int e) {
      float v = Get(xc[j], e);
      if constexpr (kHasResidual) v += Get(rc[j], e);
      return v;
    };
    float sum_sq = 0.f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        const float v = sum_at(j, e);
        sum_sq += v * v;
      }
    }
    sum_sq = RowSum(sum_sq, tpr, group, parity, partials);
    const float inv_rms = rsqrtf(sum_sq * p.inv_hidden + p.eps);

    if (in_range) {
#pragma unroll
      for (int j = 0; j < kVecsPerThread; ++j) {
        if (!valid[j]) continue;
        float o[kElems];
#pragma unroll
        for (int e = 0; e < kElems; ++e) o[e] = sum_at(j, e) * inv_rms * Get(wv[j], e);
        if constexpr (kOp == RowOp::kAddNormStoreSum) {
          float sum[kElems];
#pragma unroll
          for (int e = 0; e < kElems; ++e) sum[e] = sum_at(j, e);
          Store(sum_out + base + j * tpr, Make<T>(sum));
        }
        Store(out + base + j * tpr, Make<T>(o));
      }
    }
    parity ^= 1;
  }
}

// Rows longer than the register path holds: one row per CTA, a first pass for the sum of
// squares and a second pass that reads x and r again (mostly L2 hits: a resident wave's rows
// fit in L2) and writes. In-place safety: the barrier inside RowSum separates the first
// pass's reads from the second pass's writes, and in the second pass each element is read
// and then written by the same thread.
template <typename T, int kElems, RowOp kOp>
__global__ void __launch_bounds__(kMaxThreads) TwoPassKernel(const RowParams p) {
  using P = Vec<T, kElems>;
  constexpr bool kHasResidual = kOp != RowOp::kNorm;
  __shared__ float partials[2][kMaxThreads / kWarp];

  PdlWaitAndRelease();
  const auto* x = static_cast<const P*>(p.x);
  const auto* r = static_cast<const P*>(p.r);
  const auto* w = static_cast<const P*>(p.w);
  auto* out = static_cast<P*>(p.out);
  auto* sum_out = static_cast<P*>(p.sum_out);
  int parity = 0;
  for (std::int64_t row = blockIdx.x; row < p.batch; row += gridDim.x) {
    const std::int64_t base = row * p.units;
    float sum_sq = 0.f;
    for (int u = threadIdx.x; u < p.units; u += blockDim.x) {
      const P xv = Load(x + base + u);
      P rv{};
      if constexpr (kHasResidual) rv = Load(r + base + u);
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        float v = Get(xv, e);
        if constexpr (kHasResidual) v += Get(rv, e);
        sum_sq += v * v;
      }
    }
    sum_sq = RowSum(sum_sq, blockDim.x, 0, parity, partials);
    const float inv_rms = rsqrtf(sum_sq * p.inv_hidden + p.eps);
    for (int u = threadIdx.x; u < p.units; u += blockDim.x) {
      const P xv = Load(x + base + u);
      P rv{};
      if constexpr (kHasResidual) rv = Load(r + base + u);
      const P wv = LoadReused(w + u);
      float o[kElems];
      float sum[kElems];
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        sum[e] = Get(xv, e);
        if constexpr (kHasResidual) sum[e] += Get(rv, e);
        o[e] = sum[e] * inv_rms * Get(wv, e);
      }
      if constexpr (kOp == RowOp::kAddNormStoreSum) {
        Store(sum_out + base + u, Make<T>(sum));
      }
      Store(out + base + u, Make<T>(o));
    }
    parity ^= 1;
  }
}

}  // namespace kerneleval::cuda_detail
