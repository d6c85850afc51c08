// The row kernels: a row lives in registers (RowKernel), or several rows per thread
// (a tuning variant), or, for rows too long for registers, two passes over the row.
#pragma once

#include "rmsnorm_primitives.cuh"

namespace kerneleval::cuda_detail {

// One row per group of threads_per_row threads, rows_per_cta groups per CTA; thread `lane`
// of a group owns the units lane + j * threads_per_row (j < kVecsPerThread) of its row and
// issues every load of the row (x, r and the weight) before the first use. The launcher gives
// each row block its own CTA; with a smaller grid (tuning) a CTA walks row blocks with a grid
// stride, and with kPrefetch the next row's x and r are loaded before the current row is
// reduced and stored.
//
// In-place safety: every element is read and written by the same thread, and a thread reads
// a row completely before it writes any of it, so output may alias x and sum_out may alias r.
//
// Registers: at one vector per thread the plain kernel fits 32 registers (8 CTAs of 256
// threads per SM) and the prefetching one 40 (6 CTAs); left alone, ptxas for sm_90a takes 48.
// At two vectors per thread the plain kernel fits 48 without spilling (10 CTAs of 128).
template <int kVecsPerThread, bool kPrefetch>
constexpr int RowKernelRegisters() {
  if (kVecsPerThread == 1) return kPrefetch ? 40 : 32;
  return kVecsPerThread == 2 && !kPrefetch ? 48 : 64;
}

template <typename T, int kElems, int kVecsPerThread, RowOp kOp, bool kPrefetch>
__global__ void __launch_bounds__(kMaxThreads)
    __maxnreg__((RowKernelRegisters<kVecsPerThread, kPrefetch>())) RowKernel(const RowParams p) {
  static_assert(!kPrefetch || kVecsPerThread <= 2, "a prefetched row of 4 vectors spills");
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

  auto load_row = [&](std::int64_t row, P* xs, P* rs) {
    const bool in_range = row < p.batch;
    const std::int64_t base = row * p.units + lane;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      if (in_range && valid[j]) {
        xs[j] = LoadStreaming(x + base + j * tpr, p.streaming);
        if constexpr (kHasResidual) rs[j] = LoadStreaming(r + base + j * tpr, p.streaming);
      } else {
        xs[j] = P{};
        if constexpr (kHasResidual) rs[j] = P{};
      }
    }
  };

  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * p.rows_per_cta;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * p.rows_per_cta;
  P xc[kVecsPerThread];
  P rc[kVecsPerThread];
  if constexpr (kPrefetch) load_row(first + group, xc, rc);
  int parity = 0;
  for (std::int64_t block_row = first; block_row < p.batch; block_row += step) {
    const std::int64_t row = block_row + group;
    if constexpr (!kPrefetch) load_row(row, xc, rc);
    P wv[kVecsPerThread];
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      wv[j] = valid[j] ? LoadReused(w + lane + j * tpr) : P{};
    }
    P xn[kVecsPerThread];
    P rn[kVecsPerThread];
    if constexpr (kPrefetch) load_row(row + step, xn, rn);

    // The fp32 sum is formed twice, here and at the store, rather than kept: holding it
    // across the barrier next to the prefetched row spills at two 16-byte vectors per thread.
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

    if (row < p.batch) {
      const std::int64_t base = row * p.units + lane;
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
          StoreStreaming(sum_out + base + j * tpr, Make<T>(sum), p.streaming);
        }
        StoreStreaming(out + base + j * tpr, Make<T>(o), p.streaming);
      }
    }
    if constexpr (kPrefetch) {
#pragma unroll
      for (int j = 0; j < kVecsPerThread; ++j) {
        xc[j] = xn[j];
        if constexpr (kHasResidual) rc[j] = rn[j];
      }
    }
    parity ^= 1;
  }
}

// Several rows per thread, for rows of one unit per thread and at least one warp: each
// thread holds kRows rows (one unit of each), so a CTA has kRows rows of loads in flight at
// once and pays one barrier for all of them. A tuning option only: on the H200 it was no
// faster than one row per CTA, so more bytes in flight is not what large batches lack there.
template <typename T, int kElems, int kRows, RowOp kOp>
__global__ void __launch_bounds__(kMaxThreads) __maxnreg__(kRows <= 2 ? 40 : 64)
    MultiRowKernel(const RowParams p) {
  using P = Vec<T, kElems>;
  constexpr bool kHasResidual = kOp != RowOp::kNorm;
  __shared__ float partials[2][kRows][kMaxThreads / kWarp];

  PdlWaitAndRelease();
  const int lane = threadIdx.x;  // the unit of every row this thread owns
  const bool valid = lane < p.units;
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  const auto* x = static_cast<const P*>(p.x);
  const auto* r = static_cast<const P*>(p.r);
  const auto* w = static_cast<const P*>(p.w);
  auto* out = static_cast<P*>(p.out);
  auto* sum_out = static_cast<P*>(p.sum_out);
  int parity = 0;
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kRows; first < p.batch;
       first += static_cast<std::int64_t>(gridDim.x) * kRows) {
    P xs[kRows];
    P rs[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const bool load = valid && first + k < p.batch;
      const std::int64_t at = (first + k) * p.units + lane;
      xs[k] = load ? LoadStreaming(x + at, p.streaming) : P{};
      if constexpr (kHasResidual) rs[k] = load ? LoadStreaming(r + at, p.streaming) : P{};
    }
    const P wv = valid ? LoadReused(w + lane) : P{};
    auto sum_at = [&](int k, int e) {
      float v = Get(xs[k], e);
      if constexpr (kHasResidual) v += Get(rs[k], e);
      return v;
    };
    float sum_sq[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      sum_sq[k] = 0.f;
#pragma unroll
      for (int e = 0; e < kElems; ++e) sum_sq[k] += sum_at(k, e) * sum_at(k, e);
    }
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
#pragma unroll
      for (int k = 0; k < kRows; ++k) sum_sq[k] += __shfl_xor_sync(0xffffffffu, sum_sq[k], offset);
    }
    if (threadIdx.x % kWarp == 0) {
#pragma unroll
      for (int k = 0; k < kRows; ++k) partials[parity][k][warp] = sum_sq[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      float total = 0.f;
#pragma unroll 4
      for (int i = 0; i < warps; ++i) total += partials[parity][k][i];
      const float inv_rms = rsqrtf(total * p.inv_hidden + p.eps);
      if (!valid || first + k >= p.batch) continue;
      const std::int64_t at = (first + k) * p.units + lane;
      float o[kElems];
#pragma unroll
      for (int e = 0; e < kElems; ++e) o[e] = sum_at(k, e) * inv_rms * Get(wv, e);
      if constexpr (kOp == RowOp::kAddNormStoreSum) {
        float sum[kElems];
#pragma unroll
        for (int e = 0; e < kElems; ++e) sum[e] = sum_at(k, e);
        StoreStreaming(sum_out + at, Make<T>(sum), p.streaming);
      }
      StoreStreaming(out + at, Make<T>(o), p.streaming);
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
      const P xv = LoadStreaming(x + base + u, p.streaming);
      P rv{};
      if constexpr (kHasResidual) rv = LoadStreaming(r + base + u, p.streaming);
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
      const P xv = LoadStreaming(x + base + u, p.streaming);
      P rv{};
      if constexpr (kHasResidual) rv = LoadStreaming(r + base + u, p.streaming);
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
        StoreStreaming(sum_out + base + u, Make<T>(sum), p.streaming);
      }
      StoreStreaming(out + base + u, Make<T>(o), p.streaming);
    }
    parity ^= 1;
  }
}

}  // namespace kerneleval::cuda_detail
