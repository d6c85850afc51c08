// Device building blocks of every row kernel: storage types and their bits, global
// accesses with their cache hints, programmatic dependent launch, the row parameters and the
// row-wide sum.
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

// x, r and the stored results are touched once per call, through plain accesses: on the
// H200, evict-first hints (ld/st.global.cs) were up to 8% slower at large batches, and an L2
// evict-first policy on the loads alone 2-9% slower (docs/results/kernels.md).
template <typename V>
__device__ __forceinline__ V Load(const V* p) {
  return V{*reinterpret_cast<const typename V::Raw*>(p)};
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
__device__ __forceinline__ void Store(V* p, const V& v) {
  *reinterpret_cast<typename V::Raw*>(p) = v.raw;
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
  int ctas_per_row;  // SplitRowKernel: the CTAs (one cluster) that share a row
  float inv_hidden;
  float eps;
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

}  // namespace kerneleval::cuda_detail
