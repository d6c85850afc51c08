// The built-in cuda_fused kernel (kernels/cuda/rmsnorm_split_row_kernel.cuh, SplitRowKernel
// with one CTA per row) written against the submission ABI: the row spread over the CTA's
// threads with up to two 16-byte vectors each, x, r and the weight (through the read-only
// path) loaded at entry, x + r kept as fp32 sums, residual_out (where the call wants it)
// stored before the reduction, so that a row costs one DRAM round trip, one barrier and
// nothing in shared memory but the warps' partial sums. Programmatic dependent launch: the
// wait comes before any global access. As in the built-in, the sum of squares is multiplied
// by 1 / hidden (the block's inv_hidden) rather than divided, results are packed two at a
// time and the kernel is capped at 48 registers: at hidden 2048 bf16 the two agree bit for
// bit. The fast path is the code right behind the entry (docs/results/submissions-h200.md
// has what each choice measured).
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
  static __device__ __forceinline__ unsigned Pack2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
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
  static __device__ __forceinline__ unsigned Pack2(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
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

// kElems fp32 values as one packed vector, each rounded once to nearest-even; 16-bit types
// two at a time (one conversion instruction per pair, as the built-in packs them).
template <int kDType, int kElems>
__device__ __forceinline__ Pack<typename Traits<kDType>::Raw, kElems> MakePack(
    const float (&f)[kElems]) {
  using T = Traits<kDType>;
  Pack<typename T::Raw, kElems> v;
  if constexpr (sizeof(typename T::Raw) == 2 && kElems == 8) {
    v.bits = make_uint4(T::Pack2(f[0], f[1]), T::Pack2(f[2], f[3]), T::Pack2(f[4], f[5]),
                        T::Pack2(f[6], f[7]));
  } else {
#pragma unroll
    for (int e = 0; e < kElems; ++e) v.e[e] = T::FromFloat(f[e]);
  }
  return v;
}

// 1 / rms from the row's sum of squares: a multiply by the block's 1 / hidden, not a
// division on the path after the reduction; the built-in does the same, so the two agree bit
// for bit.
__device__ __forceinline__ float InvRms(float sum_sq, const kerneleval_params& p) {
  return rsqrtf(sum_sq * p.inv_hidden + p.eps);
}

// The row in registers: kVecs units per thread, kept as the fp32 sums x + r (as many
// registers as one packed input for 16-bit types). The weight's loads are issued right
// behind x and r's, before residual_out (where the call wants it) is stored and the
// reduction runs: with the store first, ptxas kept them behind it. In place is safe: each
// element is read and written by the same thread, and all of a thread's reads come before
// its writes.
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
  P wv[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (first + j * stride < units) wv[j] = LoadWeight(ptr.w + first + j * stride);
  }
  if (ptr.res != nullptr) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (first + j * stride < units) ptr.res[first + j * stride] = MakePack<kDType>(s[j]);
    }
  }
  const float inv_rms = InvRms(BlockSum(sum_sq, partials), p);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (first + j * stride >= units) continue;
    float o[kElems];
#pragma unroll
    for (int e = 0; e < kElems; ++e) o[e] = s[j][e] * inv_rms * T::ToFloat(wv[j].e[e]);
    ptr.out[first + j * stride] = MakePack<kDType>(o);
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
  const float inv_rms = InvRms(BlockSum(sum_sq, partials), p);
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
// thread), rows of any length. Inlined: out of line (__noinline__) the kernel copied its
// whole parameter block to local memory at entry to pass it by reference, and every call
// ran 2.3x slower at large batches on the H200.
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
// the kernel holds only its dtype's paths. Capped at 48 registers like the built-in's row
// kernel of two vectors per thread (10 CTAs of 128 threads per SM, no spills); left alone,
// ptxas for sm_90a gave it 52, and at 40 the weight's loads waited for the sums.
template <int kDType>
__global__ void __maxnreg__(48) fused_rows_vec16(const kerneleval_params p) {
  __shared__ float partials[kMaxWarps];
  const long long row = blockIdx.x;
  // The whole CTA leaves together. Tested before the PDL wait: reading the parameter block
  // is no global access, and this first read of it then overlaps the kernel before this one
  // instead of following it (0.03-0.07 us per call at small batches on the H200). No dtype
  // check: the service launches a submission only for the dtype it was registered for, and
  // every field read before the first load is in the parameter block's first 48 bytes
  // (pointers, batch, hidden, flags).
  if (row >= p.batch) return;
  // A kernel before this one in the stream may have written our inputs: wait for it before
  // any global access, then let the next kernel's CTAs start launching.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // Where the service vouches for 16-byte rows and 32-bit offsets (every call it makes but
  // odd row lengths) and the row fits two vectors per thread, one uniform branch replaces
  // the checks GeneralRow makes per thread on nine parameters before its first load.
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  constexpr unsigned kFlatRows = KERNELEVAL_FLAG_ROWS_ALIGNED16 | KERNELEVAL_FLAG_INDEX32;
  // Any other row goes the general way. Written as an early exit, so that ptxas lays the
  // fast path out right behind the entry: as an if / else it put the general paths (~32 KB
  // of code) first, which a cold call (L2 flushed, instructions fetched from DRAM) paid for.
  if ((p.flags & kFlatRows) != kFlatRows || p.hidden > 2ll * kVec * blockDim.x) {
    GeneralRow<kDType>(p, row, partials);
    return;
  }
  RegisterRow<kDType, kVec, 2, true>(p, row, static_cast<int>(p.hidden) / kVec, partials);
}

template __global__ void fused_rows_vec16<KERNELEVAL_DTYPE_BF16>(const kerneleval_params);
template __global__ void fused_rows_vec16<KERNELEVAL_DTYPE_FP16>(const kerneleval_params);
template __global__ void fused_rows_vec16<KERNELEVAL_DTYPE_FP32>(const kerneleval_params);
