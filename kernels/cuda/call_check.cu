#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kerneleval/kernels/call_check_cuda.h"

namespace kerneleval {
namespace {

constexpr int kCheckThreads = 256;

// splitmix64's finalizer over a counter: independent streams per (seed, index).
__device__ __forceinline__ std::uint64_t Hash(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A multiple of 2^-14 in [-2, 2): exact in fp32, so only the one rounding to the dtype
// (round to nearest even, exact IEEE) stands between the value and its stored bits.
__device__ __forceinline__ float InputValue(std::uint64_t seed, std::uint64_t i) {
  const int k = static_cast<int>((Hash(seed, i) >> 48) & 0xffffu) - 32768;
  return static_cast<float>(k) * (1.0f / 16384.0f);
}

__device__ __forceinline__ unsigned StoredBits(DType dtype, float v) {
  if (dtype == DType::kBF16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  if (dtype == DType::kFP16) return __half_as_ushort(__float2half_rn(v));
  return __float_as_uint(v);
}

__device__ __forceinline__ double BitsToDouble(DType dtype, unsigned bits) {
  if (dtype == DType::kBF16) {
    return static_cast<double>(
        __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits))));
  }
  if (dtype == DType::kFP16) {
    return static_cast<double>(__half2float(__ushort_as_half(static_cast<unsigned short>(bits))));
  }
  return static_cast<double>(__uint_as_float(bits));
}

__device__ __forceinline__ unsigned LoadBits(DType dtype, const void* p, std::int64_t i) {
  if (dtype == DType::kFP32) return static_cast<const unsigned*>(p)[i];
  return static_cast<const unsigned short*>(p)[i];
}

__device__ __forceinline__ void Store(DType dtype, void* p, std::size_t i, unsigned bits) {
  if (dtype == DType::kFP32) {
    static_cast<unsigned*>(p)[i] = bits;
  } else {
    static_cast<unsigned short*>(p)[i] = static_cast<unsigned short>(bits);
  }
}

__global__ void FillInputKernel(void* data, std::size_t n, DType dtype, std::uint64_t seed,
                                float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    Store(dtype, data, i, StoredBits(dtype, InputValue(seed, i) * scale));
  }
}

__global__ void FillGuardKernel(unsigned char* data, std::size_t n, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    data[i] = static_cast<unsigned char>(Hash(seed, i));
  }
}

// Per-thread tallies, added to the record once per thread.
struct Tally {
  unsigned long long bad = 0, nonfinite = 0, first_complement = 0;
  __device__ void Fail(std::uint64_t index, bool finite) {
    ++bad;
    if (!finite) ++nonfinite;
    first_complement = max(first_complement, ~static_cast<unsigned long long>(index));
  }
  __device__ void AddTo(CallCheckCounts* c, int tensor) const {
    if (bad == 0) return;
    atomicAdd(&c->bad[tensor], bad);
    if (nonfinite != 0) atomicAdd(&c->nonfinite[tensor], nonfinite);
    atomicMax(&c->first_bad_complement[tensor], first_complement);
  }
};

__global__ void CheckUnchangedKernel(const void* data, const void* pristine, std::size_t n,
                                     DType dtype, int tensor, CallCheckCounts* counts) {
  Tally t;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const auto e = static_cast<std::int64_t>(i);
    if (LoadBits(dtype, data, e) != LoadBits(dtype, pristine, e)) t.Fail(i, true);
  }
  t.AddTo(counts, tensor);
}

__global__ void CheckGuardKernel(const unsigned char* data, std::size_t n, std::uint64_t seed,
                                 int tensor, CallCheckCounts* counts) {
  unsigned long long changed = 0, first_complement = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if (data[i] != static_cast<unsigned char>(Hash(seed, i))) {
      ++changed;
      first_complement = max(first_complement, ~static_cast<unsigned long long>(i));
    }
  }
  if (changed == 0) return;
  atomicAdd(&counts->guard_changed[tensor], changed);
  atomicMax(&counts->first_guard_complement[tensor], first_complement);
}

// One block per row: the row's fp64 reference from the regenerated inputs (as
// FusedAddRmsNormReference computes it), then every element compared.
__global__ void __launch_bounds__(kCheckThreads)
    CheckCallKernel(const CallCheckArgs a, CallCheckCounts* counts) {
  __shared__ double partial[kCheckThreads];
  const std::int64_t row = blockIdx.x;
  const std::int64_t base = row * a.hidden;
  double sum_sq = 0;
  // The hidden_states element's bits: regenerated, or read where another call wrote them.
  auto x_bits = [&](std::int64_t e) {
    return a.hidden_states_given ? LoadBits(a.dtype, a.hidden_states, e)
                                 : StoredBits(a.dtype, InputValue(a.hidden_states_seed, e));
  };
  for (std::int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    const double s =
        BitsToDouble(a.dtype, x_bits(base + i)) +
        BitsToDouble(a.dtype, StoredBits(a.dtype, InputValue(a.residual_seed, base + i)));
    sum_sq += s * s;
  }
  partial[threadIdx.x] = sum_sq;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const double inv_rms = 1.0 / sqrt(partial[0] / static_cast<double>(a.hidden) + a.eps);
  const bool in_place = a.mode == Mode::kInPlace;
  Tally out, res, x, r, w;
  auto check = [&](Tally& t, double got, double ref, std::uint64_t index) {
    const bool finite = isfinite(got);
    // Written as "not within" so that a reference that is not finite (a chained call whose
    // input holds NaN) fails too.
    if (!finite || !(fabs(got - ref) <= a.atol + a.rtol * fabs(ref))) t.Fail(index, finite);
  };
  for (std::int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    const std::int64_t e = base + i;
    const unsigned xb = x_bits(e);
    const unsigned rb = StoredBits(a.dtype, InputValue(a.residual_seed, e));
    const double s = BitsToDouble(a.dtype, xb) + BitsToDouble(a.dtype, rb);
    const double weight = BitsToDouble(a.dtype, LoadBits(a.dtype, a.pristine_weight, i));
    check(out, BitsToDouble(a.dtype, LoadBits(a.dtype, a.output, e)), s * inv_rms * weight, e);
    if (a.residual_out != nullptr) {
      check(res, BitsToDouble(a.dtype, LoadBits(a.dtype, a.residual_out, e)), s, e);
    }
    if (!in_place) {
      if (!a.hidden_states_given && LoadBits(a.dtype, a.hidden_states, e) != xb) x.Fail(e, true);
      if (LoadBits(a.dtype, a.residual, e) != rb) r.Fail(e, true);
    }
    if (row == 0 && LoadBits(a.dtype, a.weight, i) != LoadBits(a.dtype, a.pristine_weight, i)) {
      w.Fail(i, true);
    }
  }
  out.AddTo(counts, kCheckOutput);
  res.AddTo(counts, kCheckResidualOut);
  x.AddTo(counts, kCheckHiddenStates);
  r.AddTo(counts, kCheckResidual);
  w.AddTo(counts, kCheckWeight);
}

// One block per row, the calls in order: the row's sums carried from call to call in
// `state`, each thread always on the same elements (no barrier needed for them).
__global__ void __launch_bounds__(kCheckThreads)
    CheckInPlaceChainKernel(const ChainCheckArgs a, CallCheckCounts* counts) {
  __shared__ double partial[kCheckThreads];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * a.hidden;
  for (std::int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    Store(a.dtype, a.state, static_cast<std::size_t>(base + i),
          StoredBits(a.dtype, InputValue(a.residual_seed, base + i)));
  }
  auto within = [&](double got, double ref) {
    return isfinite(got) && fabs(got - ref) <= a.atol + a.rtol * fabs(ref);
  };
  for (int j = 0; j < a.calls; ++j) {
    const std::uint64_t seed = a.hidden_states_seeds[j];
    const void* output = a.slots + static_cast<std::size_t>(j) * a.slot_stride;
    double sum_sq = 0;
    for (std::int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
      const double s = BitsToDouble(a.dtype, StoredBits(a.dtype, InputValue(seed, base + i))) +
                       BitsToDouble(a.dtype, LoadBits(a.dtype, a.state, base + i));
      sum_sq += s * s;
    }
    __syncthreads();  // the previous call's partial[0] has been read
    partial[threadIdx.x] = sum_sq;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    const double inv_rms = 1.0 / sqrt(partial[0] / static_cast<double>(a.hidden) + a.eps);
    Tally out, res, w;
    for (std::int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
      const std::int64_t e = base + i;
      const float x =
          static_cast<float>(BitsToDouble(a.dtype, StoredBits(a.dtype, InputValue(seed, e))));
      const float r = static_cast<float>(BitsToDouble(a.dtype, LoadBits(a.dtype, a.state, e)));
      const double s = static_cast<double>(x) + static_cast<double>(r);
      const double weight = BitsToDouble(a.dtype, LoadBits(a.dtype, a.pristine_weight, i));
      const double got = BitsToDouble(a.dtype, LoadBits(a.dtype, output, e));
      if (!within(got, s * inv_rms * weight)) out.Fail(e, isfinite(got));
      // The sum the call stored: the fp32 sum, rounded once.
      const unsigned stored = StoredBits(a.dtype, __fadd_rn(x, r));
      Store(a.dtype, a.state, static_cast<std::size_t>(e), stored);
      if (j == a.calls - 1) {
        const double left = BitsToDouble(a.dtype, LoadBits(a.dtype, a.residual, e));
        if (!within(left, BitsToDouble(a.dtype, stored))) res.Fail(e, isfinite(left));
      }
      if (j == 0 && blockIdx.x == 0 &&
          LoadBits(a.dtype, a.weight, i) != LoadBits(a.dtype, a.pristine_weight, i)) {
        w.Fail(i, true);
      }
    }
    out.AddTo(counts + j, kCheckOutput);
    res.AddTo(counts + j, kCheckResidualOut);
    w.AddTo(counts + j, kCheckWeight);
  }
}

unsigned GridFor(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 4096));
}

}  // namespace

cudaError_t FillCheckedInput(void* data, std::size_t elements, DType dtype, std::uint64_t seed,
                             cudaStream_t stream, float scale) {
  if (elements == 0) return cudaSuccess;
  FillInputKernel<<<GridFor(elements), 256, 0, stream>>>(data, elements, dtype, seed, scale);
  return cudaGetLastError();
}

cudaError_t CheckUnchanged(const void* data, const void* pristine, std::size_t elements,
                           DType dtype, CallCheckTensor tensor, CallCheckCounts* counts,
                           cudaStream_t stream) {
  if (elements == 0) return cudaSuccess;
  CheckUnchangedKernel<<<GridFor(elements), 256, 0, stream>>>(data, pristine, elements, dtype,
                                                              tensor, counts);
  return cudaGetLastError();
}

cudaError_t FillGuard(void* data, std::size_t bytes, std::uint64_t seed, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  FillGuardKernel<<<GridFor(bytes), 256, 0, stream>>>(static_cast<unsigned char*>(data), bytes,
                                                      seed);
  return cudaGetLastError();
}

cudaError_t CheckGuard(const void* data, std::size_t bytes, std::uint64_t seed,
                       CallCheckTensor tensor, CallCheckCounts* counts, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  CheckGuardKernel<<<GridFor(bytes), 256, 0, stream>>>(static_cast<const unsigned char*>(data),
                                                       bytes, seed, tensor, counts);
  return cudaGetLastError();
}

cudaError_t CheckInPlaceChain(const ChainCheckArgs& args, CallCheckCounts* counts,
                              cudaStream_t stream) {
  if (args.batch <= 0 || args.hidden <= 0 || args.calls <= 0) return cudaSuccess;
  CheckInPlaceChainKernel<<<static_cast<unsigned>(args.batch), kCheckThreads, 0, stream>>>(args,
                                                                                           counts);
  return cudaGetLastError();
}

cudaError_t CheckCall(const CallCheckArgs& args, CallCheckCounts* counts, cudaStream_t stream) {
  if (args.batch <= 0 || args.hidden <= 0) return cudaSuccess;
  CheckCallKernel<<<static_cast<unsigned>(args.batch), kCheckThreads, 0, stream>>>(args, counts);
  return cudaGetLastError();
}

}  // namespace kerneleval
