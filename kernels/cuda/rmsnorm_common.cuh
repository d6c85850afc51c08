// Device building blocks shared by the fused kernel and the unfused baseline: storage types,
// global accesses, the row kernel (a row lives in registers), a several-rows-per-thread
// variant and the two-pass fallback for rows too long for registers. Host-side launch
// helpers are at the end.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval::cuda_detail {

// kElems consecutive elements moved as one access and kept in registers as raw bits: 16
// bytes on the vector paths, one element on the scalar (unaligned) paths. Elements are
// unpacked with shifts and packed in pairs, so a 16-byte vector stays in four registers.
template <int kBytes>
struct RawOf;
template <>
struct RawOf<2> {
  using type = unsigned short;
};
template <>
struct RawOf<4> {
  using type = unsigned int;
};
template <>
struct RawOf<16> {
  using type = uint4;
};

template <typename T, int kElems>
struct Vec {
  static_assert(kElems == 1 || sizeof(T) * kElems == 16);
  using Raw = typename RawOf<sizeof(T) * kElems>::type;
  Raw raw;
};

template <typename T>
struct Bits;
template <>
struct Bits<__nv_bfloat16> {
  static __device__ __forceinline__ float Low(unsigned w) { return __uint_as_float(w << 16); }
  static __device__ __forceinline__ float High(unsigned w) {
    return __uint_as_float(w & 0xffff0000u);
  }
  static __device__ __forceinline__ unsigned Pack2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
  static __device__ __forceinline__ float One(unsigned short h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
  }
  static __device__ __forceinline__ unsigned short PackOne(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
template <>
struct Bits<__half> {
  static __device__ __forceinline__ float Low(unsigned w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
  }
  static __device__ __forceinline__ float High(unsigned w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
  static __device__ __forceinline__ unsigned Pack2(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
  static __device__ __forceinline__ float One(unsigned short h) {
    return __half2float(__ushort_as_half(h));
  }
  static __device__ __forceinline__ unsigned short PackOne(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

__device__ __forceinline__ unsigned Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Element e of a vector as fp32; e must be a compile-time constant after unrolling.
template <typename T, int kElems>
__device__ __forceinline__ float Get(const Vec<T, kElems>& v, int e) {
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (kElems == 1) {
      return __uint_as_float(v.raw);
    } else {
      return __uint_as_float(Word(v.raw, e));
    }
  } else if constexpr (kElems == 1) {
    return Bits<T>::One(v.raw);
  } else {
    const unsigned w = Word(v.raw, e / 2);
    return e % 2 == 0 ? Bits<T>::Low(w) : Bits<T>::High(w);
  }
}

// A vector from kElems fp32 values, each rounded once to nearest-even.
template <typename T, int kElems>
__device__ __forceinline__ Vec<T, kElems> Make(const float (&f)[kElems]) {
  Vec<T, kElems> v;
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (kElems == 1) {
      v.raw = __float_as_uint(f[0]);
    } else {
      v.raw = make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                         __float_as_uint(f[3]));
    }
  } else if constexpr (kElems == 1) {
    v.raw = Bits<T>::PackOne(f[0]);
  } else {
    v.raw = make_uint4(Bits<T>::Pack2(f[0], f[1]), Bits<T>::Pack2(f[2], f[3]),
                       Bits<T>::Pack2(f[4], f[5]), Bits<T>::Pack2(f[6], f[7]));
  }
  return v;
}

// x, r and the stored results are touched once per call. `streaming` (uniform per launch)
// marks them evict-first (ld/st.global.cs); on the H200 that was up to 8% slower than plain
// accesses at large batches, so the launcher passes false and the option stays for the
// benchmark.
template <typename V>
__device__ __forceinline__ V LoadStreaming(const V* p, bool streaming) {
  const auto* raw = reinterpret_cast<const typename V::Raw*>(p);
  return V{streaming ? __ldcs(raw) : *raw};
}

// The weight is read by every row through the read-only path (L1 and L2 hits after the first
// rows). Loaded through asm, it stays four packed registers per 16-byte vector; through
// __ldg, ptxas for sm_90a kept it unpacked to fp32 (8 registers), which with the rest took
// the row kernel from 32 to 48 registers and 8 to 5 resident CTAs per SM.
__device__ __forceinline__ uint4 LoadReusedRaw(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned LoadReusedRaw(const unsigned* p) {
  unsigned v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short LoadReusedRaw(const unsigned short* p) {
  unsigned short v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
template <typename V>
__device__ __forceinline__ V LoadReused(const V* p) {
  return V{LoadReusedRaw(reinterpret_cast<const typename V::Raw*>(p))};
}

template <typename V>
__device__ __forceinline__ void StoreStreaming(V* p, const V& v, bool streaming) {
  auto* raw = reinterpret_cast<typename V::Raw*>(p);
  if (streaming) {
    __stcs(raw, v.raw);
  } else {
    *raw = v.raw;
  }
}

// Programmatic dependent launch. The wait comes before any global access, the weight
// included: a preceding kernel in the stream may have written any of our inputs, and
// griddepcontrol.wait is what makes its writes visible. Without the launch attribute both
// instructions are no-ops.
__device__ __forceinline__ void PdlWaitAndRelease() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

enum class RowOp {
  kAddNorm,          // output = norm(x + r)
  kAddNormStoreSum,  // output = norm(x + r), sum_out = x + r
  kNorm,             // output = norm(x): the second kernel of the unfused baseline
};

struct RowParams {
  const void* x;  // hidden_states, or the rounded sum for RowOp::kNorm
  const void* r;
  const void* w;
  void* out;
  void* sum_out;
  std::int64_t batch;
  int units;            // Vec units per row: hidden / kElems
  int threads_per_row;  // a power of two <= 32, or a multiple of 32
  int rows_per_cta;
  float inv_hidden;
  float eps;
  bool streaming;  // evict-first cache hints on x, r and the stores
};

constexpr int kMaxThreads = 1024;
constexpr int kWarp = 32;

// Sum of v over the threads of one row. Sub-warp rows reduce with shuffles only; rows of
// several warps add one shared-memory exchange and a single barrier, after which every warp
// adds the partials itself (no second barrier, no broadcast). The partials are double
// buffered by iteration parity so that a warp racing ahead into the next row cannot overwrite
// partials another warp has not read yet. The order of additions depends on the row layout
// only, never on the batch, so a row's result does not change with the batch size.
__device__ __forceinline__ float RowSum(float v, int threads_per_row, int group, int parity,
                                        float (*partials)[kMaxThreads / kWarp]) {
  if (threads_per_row <= kWarp) {
    for (int offset = threads_per_row / 2; offset > 0; offset /= 2) {
      v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) partials[parity][warp] = v;
  __syncthreads();
  const int warps_per_row = threads_per_row / kWarp;
  const float* mine = partials[parity] + group * warps_per_row;
  float total = 0.f;
#pragma unroll 4
  for (int i = 0; i < warps_per_row; ++i) total += mine[i];
  return total;
}

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

// Host side.

// How a row is spread over threads. A function of the row length (and the tuning override)
// only, never of the batch: see RowSum.
struct RowLayout {
  bool two_pass = false;
  int rows_per_thread = 1;  // > 1: MultiRowKernel, one CTA per row group
  int vecs_per_thread = 1;
  int threads_per_row = 0;
  int rows_per_cta = 1;
  int block = 0;
};

// The register path holds up to 4 units per thread at 1024 threads, except 16-bit vectors:
// 4 of those (32 elements) spill on sm_90a at the 64 registers that 1024 threads allow, so
// they stop at 2 (hidden <= 16384). Longer rows are streamed twice. Fewer units per thread
// spread a row over more threads, which is what the latency of small batches wants; at
// hidden 2048 bf16 it is one 16-byte vector per thread.
template <typename T, int kElems>
constexpr int MaxVecsPerThread() {
  return sizeof(T) == 2 && kElems > 1 ? 2 : 4;
}
constexpr int kTwoPassThreads = 1024;

inline RowLayout ChooseRowLayout(std::int64_t units, int forced_vecs_per_thread,
                                 int max_vecs_per_thread) {
  RowLayout layout;
  if (units > static_cast<std::int64_t>(max_vecs_per_thread) * kMaxThreads) {
    layout.two_pass = true;
    layout.threads_per_row = kTwoPassThreads;
    layout.block = kTwoPassThreads;
    return layout;
  }
  // Two units per thread once a row has more than 128: at hidden 2048 bf16 that is 128
  // threads per row, which measured ~5% faster than 256 at small batches and no slower at
  // large ones on the H200 (a shorter reduction, fewer warps to launch).
  const int needed = units <= kMaxThreads ? 1 : units <= 2 * kMaxThreads ? 2 : 4;
  int vpt = std::max(needed, units <= 128 ? 1 : 2);
  if (forced_vecs_per_thread == 1 || forced_vecs_per_thread == 2 || forced_vecs_per_thread == 4) {
    vpt = std::max(needed, forced_vecs_per_thread);
  }
  vpt = std::min(vpt, max_vecs_per_thread);
  layout.vecs_per_thread = vpt;
  const int threads = static_cast<int>((units + vpt - 1) / vpt);
  int tpr = 1;
  if (threads <= kWarp) {
    while (tpr < threads) tpr *= 2;
  } else {
    tpr = (threads + kWarp - 1) / kWarp * kWarp;
  }
  layout.threads_per_row = tpr;
  // At least 128 threads per CTA so that short rows do not leave the CTA slots of an SM
  // (at most 32) as the limit on occupancy.
  layout.rows_per_cta = tpr >= 128 ? 1 : 128 / tpr;
  layout.block = tpr * layout.rows_per_cta;
  return layout;
}

struct GridChoice {
  std::int64_t blocks_needed = 0;
  int grid = 0;
  bool one_wave = true;     // every CTA is resident at once: the latency regime
  bool persistent = false;  // fewer CTAs than row blocks: each CTA loops
};

// Grid: one CTA per row block. With `persistent`, at most as many CTAs as are resident,
// each looping over row blocks with the next row prefetched; on the H200 that lost to one
// CTA per row block (the block scheduler balances SMs better than a fixed split, and the
// prefetching kernel needs 40 registers against 32), so it is a tuning option.
template <typename Kernel>
cudaError_t ChooseGrid(Kernel kernel, const RowLayout& layout, std::int64_t batch, bool persistent,
                       int max_ctas, GridChoice* choice) {
  const std::int64_t rows = layout.two_pass ? 1 : layout.rows_per_cta * layout.rows_per_thread;
  choice->blocks_needed = (batch + rows - 1) / rows;
  std::int64_t grid = choice->blocks_needed;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  if (grid > sms) {
    int per_sm = 0;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, layout.block, 0);
    if (err != cudaSuccess) return err;
    const std::int64_t resident = static_cast<std::int64_t>(std::max(per_sm, 1)) * sms;
    choice->one_wave = grid <= resident;
    if (persistent) grid = std::min(grid, resident);
  }
  if (max_ctas > 0) grid = std::min<std::int64_t>(grid, max_ctas);
  grid = std::min<std::int64_t>(grid, std::numeric_limits<int>::max());
  choice->grid = static_cast<int>(grid);
  choice->persistent = grid < choice->blocks_needed;
  return cudaSuccess;
}

template <typename Kernel>
cudaError_t Launch(Kernel kernel, int grid, int block, bool pdl, cudaStream_t stream,
                   const RowParams& params) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(block));
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = pdl ? &attribute : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, params);
  return cudaGetLastError();
}

template <typename T, int kElems, RowOp kOp>
struct RowKernels {
  using Fn = void (*)(RowParams);
  static Fn Pick(const RowLayout& layout, bool prefetch) {
    if (layout.two_pass) return TwoPassKernel<T, kElems, kOp>;
    if (layout.rows_per_thread == 2) return MultiRowKernel<T, kElems, 2, kOp>;
    if (layout.rows_per_thread == 4) return MultiRowKernel<T, kElems, 4, kOp>;
    switch (layout.vecs_per_thread) {
      case 1:
        return prefetch ? RowKernel<T, kElems, 1, kOp, true> : RowKernel<T, kElems, 1, kOp, false>;
      case 2:
        return prefetch ? RowKernel<T, kElems, 2, kOp, true> : RowKernel<T, kElems, 2, kOp, false>;
      default:
        if constexpr (MaxVecsPerThread<T, kElems>() >= 4) {
          return RowKernel<T, kElems, 4, kOp, false>;
        } else {
          return nullptr;  // ChooseRowLayout never picks it
        }
    }
  }
};

inline bool Aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Calls f(T{}) with the storage type of `dtype`; returns cudaErrorInvalidValue for an unknown
// dtype.
template <typename F>
cudaError_t DispatchDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16:
      return f(__nv_bfloat16{});
    case DType::kFP16:
      return f(__half{});
    case DType::kFP32:
      return f(float{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace kerneleval::cuda_detail
