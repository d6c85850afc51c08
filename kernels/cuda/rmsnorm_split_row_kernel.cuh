// The row kernel of the 16-byte vector paths for rows of 256+ vectors: a row in registers as
// fp32 sums over one CTA, or, past what one CTA holds, over the CTAs of a thread-block
// cluster: one pass over memory either way.
#pragma once

#include <cooperative_groups.h>

#include "rmsnorm_primitives.cuh"

namespace kerneleval::cuda_detail {

// Portable cluster sizes only (8 on sm_90a and sm_100a).
constexpr int kMaxCtasPerRow = 8;

// One thread-block cluster per row, p.ctas_per_row CTAs of blockDim.x threads each. CTA
// `rank` owns units [rank * chunk, (rank + 1) * chunk) of its row, chunk = blockDim.x *
// kVecs, and thread t of it the units rank * chunk + t + j * blockDim.x. Each thread loads
// its x and r, keeps only their fp32 sum (as many registers as one of the two packed inputs
// for 16-bit types, no more), stores sum_out right away and reduces its sum of squares over
// the CTA; the CTAs of the row then push their partial to every other CTA's shared memory
// (distributed shared memory) and meet at one cluster barrier, after which each adds the
// partials in rank order (the same total, bit for bit, in every CTA of the row).
//
// Why (docs/results/kernels.md, runs 6-10): RowKernel holds x, r and the weight packed and
// re-adds the sum at the store; keeping the fp32 sums instead frees the registers for 4
// vectors per thread, so a long row needs fewer threads (hidden 8192 fp32: 512 threads at 64
// registers, 2 CTAs per SM, 10-12% faster than RowKernel's 1024 threads at 48), and the same
// layout at hidden 2048 bf16 is 0.12 us faster per small call. Splitting a row over a
// cluster measured 5-60% slower than one CTA wherever one CTA can hold the row (the cluster
// barrier, and a row finishing with its slowest CTA), so the launcher uses clusters only for
// rows one CTA cannot hold (32768 fp32), where one pass beats two by 31%.
//
// In-place safety: every element is read and written by the same thread, reads first.
// The chunk layout depends on the row length only (the launcher's table), never on the
// batch, so a row's result does not change with the batch.
template <int kVecs>
constexpr int SplitRowRegisters() {
  return kVecs == 1 ? 32 : kVecs == 2 ? 48 : 64;
}

__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// One body: its phases share the register-held sums s[][] and span one cluster arrive/wait pair.
template <typename T, int kElems, int kVecs, RowOp kOp>
__global__ void __launch_bounds__(kMaxThreads) __maxnreg__((SplitRowRegisters<kVecs>()))
    SplitRowKernel(const RowParams p) {
  static_assert(kOp != RowOp::kNorm, "the unfused baseline uses RowKernel");
  using P = Vec<T, kElems>;
  __shared__ float warp_partials[kMaxThreads / kWarp];
  __shared__ float cta_partials[kMaxCtasPerRow];

  const int ctas = p.ctas_per_row;
  // Every CTA of the cluster must have started before one writes into another's shared
  // memory; arriving now and waiting just before the writes costs nothing in between.
  if (ctas > 1) ClusterArriveRelaxed();
  PdlWaitAndRelease();
  const int rank = ctas > 1 ? static_cast<int>(cooperative_groups::this_cluster().block_rank()) : 0;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / ctas;
  const int first = rank * static_cast<int>(blockDim.x) * kVecs + static_cast<int>(threadIdx.x);
  const std::int64_t base = row * p.units + first;
  const int stride = static_cast<int>(blockDim.x);
  const auto* x = static_cast<const P*>(p.x) + base;
  const auto* r = static_cast<const P*>(p.r) + base;
  const auto* w = static_cast<const P*>(p.w) + first;
  auto* out = static_cast<P*>(p.out) + base;

  bool valid[kVecs];
  P xv[kVecs];
  P rv[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    valid[j] = first + j * stride < p.units;
    xv[j] = valid[j] ? Load(x + j * stride) : P{};
    rv[j] = valid[j] ? Load(r + j * stride) : P{};
  }
  float s[kVecs][kElems];
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      s[j][e] = Get(xv[j], e) + Get(rv[j], e);
      sum_sq += s[j][e] * s[j][e];
    }
  }
  if constexpr (kOp == RowOp::kAddNormStoreSum) {
    auto* sum_out = static_cast<P*>(p.sum_out) + base;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (valid[j]) Store(sum_out + j * stride, Make<T>(s[j]));
    }
  }
  P wv[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) wv[j] = valid[j] ? LoadReused(w + j * stride) : P{};

#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  }
  if (threadIdx.x % kWarp == 0) warp_partials[threadIdx.x / kWarp] = sum_sq;
  __syncthreads();
  float total = 0.f;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
#pragma unroll 4
  for (int i = 0; i < warps; ++i) total += warp_partials[i];
  if (ctas > 1) {
    ClusterWait();
    if (static_cast<int>(threadIdx.x) < ctas) {
      float* peer = cooperative_groups::this_cluster().map_shared_rank(
          cta_partials, static_cast<unsigned>(threadIdx.x));
      peer[rank] = total;
    }
    // Release the pushes, acquire the others': after this every CTA of the row holds all
    // partials, and no CTA writes into another's shared memory again, so any may exit.
    ClusterSync();
    total = 0.f;
    for (int q = 0; q < ctas; ++q) total += cta_partials[q];
  }
  const float inv_rms = rsqrtf(total * p.inv_hidden + p.eps);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (!valid[j]) continue;
    float o[kElems];
#pragma unroll
    for (int e = 0; e < kElems; ++e) o[e] = s[j][e] * inv_rms * Get(wv[j], e);
    Store(out + j * stride, Make<T>(o));
  }
}

}  // namespace kerneleval::cuda_detail
