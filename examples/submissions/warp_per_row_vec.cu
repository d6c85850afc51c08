// Vectorized warp per row: eight rows per 256-thread CTA, each row read with 16-byte
// accesses by one warp, reduced with shuffles only (no shared memory, no barrier), then read
// again (L1 hits: the warp has just read those lines) to normalize and store. Rows whose
// length or pointers do not allow 16-byte accesses take the same path one element at a time.
// Every dtype and mode.
//
//   kerneleval submit --source warp_per_row_vec.cu --entry warp_per_row_vec \
//     --block 256 --rows-per-block 8 --dtype bf16 --name warp_per_row
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <kerneleval/submission_abi.h>

template <int kDType>
struct Traits;
template <>
struct Traits<KERNELEVAL_DTYPE_BF16> {
  using Raw = unsigned short;
  static __device__ __forceinline__ float ToFloat(Raw v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
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

// kElems elements moved as one access: 16 bytes, or a single element.
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

template <int kDType, int kElems>
__device__ __forceinline__ void WarpRow(const kerneleval_params& p, long long row, int lane) {
  using T = Traits<kDType>;
  using P = Pack<typename T::Raw, kElems>;
  const long long units = p.hidden / kElems;
  const P* x = reinterpret_cast<const P*>(static_cast<const typename T::Raw*>(p.hidden_states) +
                                          row * p.hidden_states_stride);
  const P* r = reinterpret_cast<const P*>(static_cast<const typename T::Raw*>(p.residual) +
                                          row * p.residual_stride);
  const P* w = static_cast<const P*>(p.weight);
  P* out = reinterpret_cast<P*>(static_cast<typename T::Raw*>(p.output) + row * p.output_stride);
  P* res = p.mode == KERNELEVAL_MODE_OUTPUT
               ? nullptr
               : reinterpret_cast<P*>(static_cast<typename T::Raw*>(p.residual_out) +
                                      row * p.residual_out_stride);
  float sum_sq = 0.f;
  for (long long u = lane; u < units; u += 32) {
    const P xv = x[u], rv = r[u];
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const float s = T::ToFloat(xv.e[e]) + T::ToFloat(rv.e[e]);
      sum_sq += s * s;
    }
  }
  // Every lane has finished reading before any lane writes: in place is safe.
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  for (long long u = lane; u < units; u += 32) {
    const P xv = x[u], rv = r[u], wv = w[u];
    P o, s;
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const float v = T::ToFloat(xv.e[e]) + T::ToFloat(rv.e[e]);
      s.e[e] = T::FromFloat(v);
      o.e[e] = T::FromFloat(v * inv_rms * T::ToFloat(wv.e[e]));
    }
    if (res != nullptr) res[u] = s;
    out[u] = o;
  }
}

__device__ __forceinline__ bool Aligned16(const void* ptr) {
  return reinterpret_cast<unsigned long long>(ptr) % 16 == 0;
}

template <int kDType>
__device__ __forceinline__ void Row(const kerneleval_params& p, long long row, int lane) {
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  const bool vector = p.hidden % kVec == 0 && p.hidden_states_stride % kVec == 0 &&
                      p.residual_stride % kVec == 0 && p.output_stride % kVec == 0 &&
                      p.residual_out_stride % kVec == 0 && Aligned16(p.hidden_states) &&
                      Aligned16(p.residual) && Aligned16(p.weight) && Aligned16(p.output) &&
                      Aligned16(p.residual_out);
  if (vector) {
    WarpRow<kDType, kVec>(p, row, lane);
  } else {
    WarpRow<kDType, 1>(p, row, lane);
  }
}

extern "C" __global__ void __launch_bounds__(256) warp_per_row_vec(const kerneleval_params p) {
  const long long row = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= p.batch) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  switch (p.dtype) {
    case KERNELEVAL_DTYPE_BF16:
      Row<KERNELEVAL_DTYPE_BF16>(p, row, lane);
      break;
    case KERNELEVAL_DTYPE_FP16:
      Row<KERNELEVAL_DTYPE_FP16>(p, row, lane);
      break;
    default:
      Row<KERNELEVAL_DTYPE_FP32>(p, row, lane);
      break;
  }
}
