// The built-in cuda_fused kernel (kernels/cuda/rmsnorm_split_row_kernel.cuh, SplitRowKernel
// with one CTA per row) written against the submission ABI: the row spread over the CTA's
// threads with up to two 16-byte vectors each, x and r loaded at entry and kept as fp32 sums,
// residual_out stored before the reduction, the weight loaded through the read-only path
// while it runs, so that a row costs one DRAM round trip, one barrier and nothing in shared
// memory but the warps' partial sums. Programmatic dependent launch: the wait comes before
// any global access.
//
// At hidden 2048 bf16 a row is 256 vectors: 128 threads of two each (the built-in's choice;
// on the H200 it measured ~5% faster than 256 threads of one at small batches). Rows longer
// than two vectors per thread are read twice; rows that do not allow 16-byte accesses go one
// element at a time. Every dtype and mode.
//
//   kerneleval submit --source fused_rows_vec16.cu --entry 'fused_rows_vec16<0>' \
//     --block 128 --rows-per-block 1 --pdl --dtype bf16 --name fused_rows_vec16
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <kerneleval/submission_abi.h>

constexpr int kMaxWarps = 32;

template <int kDType>
struct Traits;
template <>
struct Traits<KERNELEVAL_DTYPE_BF16> {
  using Raw = unsigned short;
  static __device__ __forceinline__ float ToFloat(Raw v) {
    return __uint_as_float(static_cast<unsigned>(v) << 16);
  }
  static __device__ __forceinline__ Raw FromFloat(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
template <>
struct Traits<KERNELEVAL_DTYPE_FP16> {
  using Raw = unsigned short;
  static __device__ __forceinline__ float ToFloat(Raw v) {
    return __half2float(__ushort_as_half(v));
  }
  static __device__ __forceinline__ Raw FromFloat(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};
template <>
struct Traits<KERNELEVAL_DTYPE_FP32> {
  using Raw = float;
  static __device__ __forceinline__ float ToFloat(Raw v) { return v; }
  static __device__ __forceinline__ Raw FromFloat(float v) { return v; }
};

template <typename Raw, int kElems>
union Pack {
  uint4 bits;
  Raw e[kElems];
};
template <typename Raw>
union Pack<Raw, 1> {
  Raw bits;
  Raw e[1];
};

// The weight is read by every row: through the non-coherent path it stays in L1.
template <typename P>
__device__ __forceinline__ P LoadWeight(const P* ptr) {
  P v;
  if constexpr (sizeof(P) == 16) {
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.bits.x), "=r"(v.bits.y), "=r"(v.bits.z), "=r"(v.bits.w)
                 : "l"(ptr));
  } else {
    v = *ptr;
  }
  return v;
}

// Sum of v over the CTA: shuffles within each warp, one barrier, then every warp adds the
// partials itself (no second barrier, no broadcast).
__device__ __forceinline__ float BlockSum(float v, float* partials) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  const int warps = blockDim.x / 32;
  for (int i = 0; i < warps; ++i) total += partials[i];
  return total;
}

// Where a row's tensors start. kFlat: the call's flags promise contiguous rows and 32-bit
// offsets (KERNELEVAL_FLAG_ROWS_ALIGNED16 | KERNELEVAL_FLAG_INDEX32), so one 32-bit product
// from `hidden` serves every tensor and no stride is read.
template <int kDType, int kElems, bool kFlat>
struct RowPtrs {
  using P = Pack<typename Traits<kDType>::Raw, kElems>;
  const P* x;
  const P* r;
  const P* w;
  P* out;
  P* res;
  __device__ RowPtrs(const kerneleval_params& p, long long row) {
    using Raw = typename Traits<kDType>::Raw;
    w = static_cast<const P*>(p.weight);
    if constexpr (kFlat) {
      const int offset = static_cast<int>(row) * (static_cast<int>(p.hidden) / kElems);
      x = static_cast<const P*>(p.hidden_states) + offset;
      r = static_cast<const P*>(p.residual) + offset;
      out = static_cast<P*>(p.output) + offset;
      res = p.residual_out == nullptr ? nullptr : static_cast<P*>(p.residual_out) + offset;
      return;
    }
    x = reinterpret_cast<const P*>(static_cast<const Raw*>(p.hidden_states) +
                                   row * p.hidden_states_stride);
    r = reinterpret_cast<const P*>(static_cast<const Raw*>(p.residual) + row * p.residual_stride);
    out = reinterpret_cast<P*>(static_cast<Raw*>(p.output) + row * p.output_stride);
    res =
        p.residual_out == nullptr
            ? nullptr
            : reinterpret_cast<P*>(static_cast<Raw*>(p.residual_out) + row * p.residual_out_stride);
  }
};

// The row in registers: kVecs units per thread, kept as the fp32 sums x + r (as many
// registers as one packed input for 16-bit types), residual_out stored before the reduction,
// the weight loaded while it runs. In place is safe: each element is read and written by
// the same thread, and all of a thread's reads come before its writes.
template <int kDType, int kElems, int kVecs, bool kFlat>
__device__ __forceinline__ void RegisterRow(const kerneleval_params& p, long long row, int units,
                                            float* partials) {
  using T = Traits<kDType>;
  const RowPtrs<kDType, kElems, kFlat> ptr(p, row);
  using P = typename RowPtrs<kDType, kElems, kFlat>::P;
  const int first = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  P xv[kVecs], rv[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (first + j * stride < units) {
      xv[j] = ptr.x[first + j * stride];
      rv[j] = ptr.r[first + j * stride];
    }
  }
  float s[kVecs][kElems];
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      s[j][e] = first + j * stride < units ? T::ToFloat(xv[j].e[e]) + T::ToFloat(rv[j].e[e]) : 0.f;
      sum_sq += s[j][e] * s[j][e];
    }
  }
  if (ptr.res != nullptr) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (first + j * stride >= units) continue;
      P sum;
#pragma unroll
      for (int e = 0; e < kElems; ++e) sum.e[e] = T::FromFloat(s[j][e]);
      ptr.res[first + j * stride] = sum;
    }
  }
  P wv[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (first + j * stride < units) wv[j] = LoadWeight(ptr.w + first + j * stride);
  }
  const float inv_rms = rsqrtf(BlockSum(sum_sq, partials) / static_cast<float>(p.hidden) + p.eps);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (first + j * stride >= units) continue;
    P o;
#pragma unroll
    for (int e = 0; e < kElems; ++e)
      o.e[e] = T::FromFloat(s[j][e] * inv_rms * T::ToFloat(wv[j].e[e]));
    ptr.out[first + j * stride] = o;
  }
}

// Rows longer than the registers hold: a pass for the sum of squares, a second pass that
// reads x and r again (mostly L2 hits) and writes. The barrier in BlockSum separates the
// first pass's reads from the second pass's writes.
template <int kDType, int kElems, bool kFlat>
__device__ __forceinline__ void TwoPassRow(const kerneleval_params& p, long long row,
                                           long long units, float* partials) {
  using T = Traits<kDType>;
  const RowPtrs<kDType, kElems, kFlat> ptr(p, row);
  using P = typename RowPtrs<kDType, kElems, kFlat>::P;
  float sum_sq = 0.f;
  for (long long u = threadIdx.x; u < units; u += blockDim.x) {
    const P xv = ptr.x[u], rv = ptr.r[u];
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const float s = T::ToFloat(xv.e[e]) + T::ToFloat(rv.e[e]);
      sum_sq += s * s;
    }
  }
  const float inv_rms = rsqrtf(BlockSum(sum_sq, partials) / static_cast<float>(p.hidden) + p.eps);
  for (long long u = threadIdx.x; u < units; u += blockDim.x) {
    const P xv = ptr.x[u], rv = ptr.r[u], wv = LoadWeight(ptr.w + u);
    P o, s;
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const float v = T::ToFloat(xv.e[e]) + T::ToFloat(rv.e[e]);
      s.e[e] = T::FromFloat(v);
      o.e[e] = T::FromFloat(v * inv_rms * T::ToFloat(wv.e[e]));
    }
    if (ptr.res != nullptr) ptr.res[u] = s;
    ptr.out[u] = o;
  }
}

__device__ __forceinline__ bool Aligned16(const void* ptr) {
  return reinterpret_cast<unsigned long long>(ptr) % 16 == 0;
}

// Any row the fast path below does not take: any alignment and strides (checked here, per
// thread), rows of any length. (Kept out of line with __noinline__ it measured no faster on
// the H200 and spilled 24 bytes.)
template <int kDType>
__device__ __forceinline__ void GeneralRow(const kerneleval_params& p, long long row,
                                           float* partials) {
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  constexpr unsigned kFlatRows = KERNELEVAL_FLAG_ROWS_ALIGNED16 | KERNELEVAL_FLAG_INDEX32;
  if ((p.flags & kFlatRows) == kFlatRows) {  // a row longer than two vectors per thread
    TwoPassRow<kDType, kVec, true>(p, row, p.hidden / kVec, partials);
    return;
  }
  const bool vector = p.hidden % kVec == 0 && p.hidden_states_stride % kVec == 0 &&
                      p.residual_stride % kVec == 0 && p.output_stride % kVec == 0 &&
                      p.residual_out_stride % kVec == 0 && Aligned16(p.hidden_states) &&
                      Aligned16(p.residual) && Aligned16(p.weight) && Aligned16(p.output) &&
                      Aligned16(p.residual_out);
  const long long units = vector ? p.hidden / kVec : p.hidden;
  if (!vector) {
    TwoPassRow<kDType, 1, false>(p, row, units, partials);
  } else if (units <= blockDim.x) {
    RegisterRow<kDType, kVec, 1, false>(p, row, static_cast<int>(units), partials);
  } else if (units <= 2ll * blockDim.x) {
    RegisterRow<kDType, kVec, 2, false>(p, row, static_cast<int>(units), partials);
  } else {
    TwoPassRow<kDType, kVec, false>(p, row, units, partials);
  }
}

// One instantiation per dtype (the entry names it: fused_rows_vec16<0> is bf16), so that
// the kernel holds only its dtype's paths. Left alone, ptxas for sm_90a gave it 52
// registers (the one-vector, two-vector and two-pass paths share the kernel); capped at 40
// it spills nothing, and 40 lets 12 CTAs of 128 threads share an SM instead of 9.
template <int kDType>
__global__ void __maxnreg__(40) fused_rows_vec16(const kerneleval_params p) {
  __shared__ float partials[kMaxWarps];
  // A kernel before this one in the stream may have written our inputs: wait for it before
  // any global access, then let the next kernel's CTAs start launching.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long row = blockIdx.x;
  // The whole CTA leaves together. No dtype check: the service launches a submission only
  // for the dtype it was registered for, and every field read before the first load is in
  // the parameter block's first 64 bytes (pointers, flags, batch, hidden).
  if (row >= p.batch) return;
  // Where the service vouches for 16-byte rows and 32-bit offsets (every call it makes but
  // odd row lengths) and the row fits two vectors per thread, one uniform branch replaces
  // the checks GeneralRow makes per thread on nine parameters before its first load.
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  constexpr unsigned kFlatRows = KERNELEVAL_FLAG_ROWS_ALIGNED16 | KERNELEVAL_FLAG_INDEX32;
  if ((p.flags & kFlatRows) == kFlatRows && p.hidden <= 2ll * kVec * blockDim.x) {
    RegisterRow<kDType, kVec, 2, true>(p, row, static_cast<int>(p.hidden) / kVec, partials);
  } else {
    GeneralRow<kDType>(p, row, partials);
  }
}

template __global__ void fused_rows_vec16<KERNELEVAL_DTYPE_BF16>(const kerneleval_params);
template __global__ void fused_rows_vec16<KERNELEVAL_DTYPE_FP16>(const kerneleval_params);
template __global__ void fused_rows_vec16<KERNELEVAL_DTYPE_FP32>(const kerneleval_params);
