// The CPU implementation: Highway SIMD code compiled once per instruction set (foreach_target)
// and picked at run time (HWY_DYNAMIC_DISPATCH), with rows spread over a CpuThreadPool.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kerneleval/kernels/cpu_simd.h"
#include "kerneleval/kernels/cpu_thread_pool.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/kernels/half_types.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "fused_add_rmsnorm_cpu.cc"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace kerneleval {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DH = hn::Rebind<std::uint16_t, DF>;  // half-width lanes for bf16 / fp16 storage
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// bf16 <-> fp32 is a 16-bit shift; the narrowing rounds to nearest even with the same
// integer steps as FloatToBf16 (Highway 1.0.3's DemoteTo to bf16 truncates).
struct Bf16 {
  using Storage = std::uint16_t;
  static VF Load(const Storage* p) {
    return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(DH(), p))));
  }
  using Packed = hn::Vec<DH>;
  using DP = DH;
  static void Store(VF v, Storage* p) { hn::StoreU(Narrow(v), DH(), p); }
  static Packed Narrow(VF v) {
    const DU du;
    const VU bits = hn::BitCast(du, v);
    const VU odd = hn::ShiftRight<16>(bits) & hn::Set(du, 1);
    const VU rounded = hn::ShiftRight<16>(bits + hn::Set(du, 0x7fff) + odd);
    const VU quiet_nan = hn::ShiftRight<16>(bits) | hn::Set(du, 0x40);
    const auto is_nan =
        hn::BitCast(DI(), bits & hn::Set(du, 0x7fffffff)) > hn::Set(DI(), 0x7f800000);
    const VU narrowed = hn::IfThenElse(hn::RebindMask(du, is_nan), quiet_nan, rounded);
    return hn::DemoteTo(DH(), hn::BitCast(DI(), narrowed));
  }
  static float LoadOne(Storage v) { return Bf16ToFloat(v); }
  static Storage StoreOne(float v) { return FloatToBf16(v); }
};

// fp16: x86 targets with F16C convert in hardware (vcvtph2ps / vcvtps2ph, exact and round to
// nearest even). Elsewhere Highway 1.0.3's emulation truncates the narrowing and widens
// Inf / NaN to finite values, so those targets use the integer steps of half_types.h
// (F. Giesen's half <-> float conversions, round to nearest even, subnormals included).
#undef KERNELEVAL_HARDWARE_F16  // this file is compiled once per target
#if HWY_ARCH_X86 && HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
#define KERNELEVAL_HARDWARE_F16 1
#else
#define KERNELEVAL_HARDWARE_F16 0
#endif

struct Fp16 {
  using Storage = std::uint16_t;
  static VF Load(const Storage* p) {
    const hn::Vec<DH> h = hn::LoadU(DH(), p);
#if KERNELEVAL_HARDWARE_F16
    return hn::PromoteTo(DF(), hn::BitCast(hn::Rebind<hwy::float16_t, DF>(), h));
#else
    const DU du;
    const VU h32 = hn::PromoteTo(du, h);
    const VU exp_mask = hn::Set(du, 0x7c00u << 13);
    VU bits = hn::ShiftLeft<13>(h32 & hn::Set(du, 0x7fff));
    const VU exp = bits & exp_mask;
    bits = bits + hn::Set(du, (127u - 15u) << 23);
    // Inf / NaN: the exponent goes all the way to 255.
    bits = hn::IfThenElse(exp == exp_mask, bits + hn::Set(du, (128u - 16u) << 23), bits);
    // Zero / subnormal: renormalize through an fp32 subtraction (exact).
    const VF renormalized = hn::BitCast(DF(), bits + hn::Set(du, 1u << 23)) -
                            hn::BitCast(DF(), hn::Set(du, 113u << 23));
    bits = hn::IfThenElse(exp == hn::Zero(du), hn::BitCast(du, renormalized), bits);
    return hn::BitCast(DF(), bits | hn::ShiftLeft<16>(h32 & hn::Set(du, 0x8000)));
#endif
  }
  using Packed = hn::Vec<DH>;
  using DP = DH;
  static void Store(VF v, Storage* p) { hn::StoreU(Narrow(v), DH(), p); }
  static Packed Narrow(VF v) {
#if KERNELEVAL_HARDWARE_F16
    return hn::BitCast(DH(), hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
#else
    const DU du;
    const DI di;
    const VU bits = hn::BitCast(du, v);
    const VU sign = bits & hn::Set(du, 0x80000000u);
    const VU abs = bits ^ sign;  // < 2^31: signed comparisons are exact
    const auto abs_i = hn::BitCast(di, abs);
    // >= 65536 (2^16): Inf, or a quiet NaN.
    const VU overflow = hn::IfThenElse(hn::RebindMask(du, abs_i > hn::Set(di, 0x7f800000)),
                                       hn::Set(du, 0x7e00), hn::Set(du, 0x7c00));
    // Below 2^-14: an fp32 addition of 0.5 rounds the subnormal's bits to nearest even.
    const VU magic = hn::Set(du, 126u << 23);
    const VU subnormal = hn::BitCast(du, hn::BitCast(DF(), abs) + hn::BitCast(DF(), magic)) - magic;
    // Normal: rebias and round the 13 dropped bits to nearest even (a carry may reach Inf).
    const VU odd = hn::ShiftRight<13>(abs) & hn::Set(du, 1);
    const VU normal = hn::ShiftRight<13>(abs + hn::Set(du, 0xc8000fffu) + odd);
    VU half = hn::IfThenElse(hn::RebindMask(du, abs_i < hn::Set(di, 113 << 23)), subnormal, normal);
    half = hn::IfThenElse(hn::RebindMask(du, abs_i > hn::Set(di, 0x477fffff)), overflow, half);
    half = half | hn::ShiftRight<16>(sign);
    return hn::DemoteTo(DH(), hn::BitCast(di, half));
#endif
  }
  static float LoadOne(Storage v) { return Fp16ToFloat(v); }
  static Storage StoreOne(float v) { return FloatToFp16(v); }
};

struct Fp32 {
  using Storage = float;
  static VF Load(const Storage* p) { return hn::LoadU(DF(), p); }
  using Packed = VF;
  using DP = DF;
  static void Store(VF v, Storage* p) { hn::StoreU(v, DF(), p); }
  static Packed Narrow(VF v) { return v; }
  static float LoadOne(Storage v) { return v; }
  static Storage StoreOne(float v) { return v; }
};

template <typename F>
void DispatchDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16:
      return f(Bf16{});
    case DType::kFP16:
      return f(Fp16{});
    case DType::kFP32:
      return f(Fp32{});
  }
}

// Row buffers of the calling thread, kept between calls (pool threads are persistent): the
// row's fp32 sum and the weight in fp32.
float* ThreadRowBuffers(std::size_t hidden) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < 2 * hidden) buffer.resize(2 * hidden);
  return buffer.data();
}

// One row at a time: every input element of a row is read into `sum` before any element of
// the row is written, so in-place aliasing is safe. With `pre_summed` set, the row sum is
// read from it instead of being computed (the unfused baseline's second pass). Rows are
// independent, so a row's result does not depend on how rows are split over threads.
// Where the stores of a row may bypass the caches: the first element whose address in `out`
// (and in `res`, when written) is aligned to a whole stored vector. hidden when it cannot be
// (a partial vector, whose non-temporal store would write past it, or mismatched alignment).
template <typename T>
std::size_t StreamStart(const typename T::Storage* out, const typename T::Storage* res,
                        std::size_t hidden) {
  using S = typename T::Storage;
  const std::size_t bytes = hn::Lanes(typename T::DP()) * sizeof(S);
  if (!HWY_ARCH_X86 || bytes < 16) return hidden;
  const auto misalign = [&](const S* p) { return reinterpret_cast<std::uintptr_t>(p) % bytes; };
  if (misalign(out) % sizeof(S) != 0) return hidden;
  if (res != nullptr && misalign(res) != misalign(out)) return hidden;
  return std::min(hidden, ((bytes - misalign(out)) % bytes) / sizeof(S));
}

template <typename T>
void NormalizeRows(const FusedAddRmsNormArgs& args, const void* pre_summed, bool stream) {
  using S = typename T::Storage;
  const DF df;
  const std::size_t lanes = hn::Lanes(df);
  const auto hidden = static_cast<std::size_t>(args.hidden);
  const std::size_t vector_end = hidden - hidden % lanes;
  const std::size_t pair_end = hidden - hidden % (2 * lanes);
  const auto* x = static_cast<const S*>(args.hidden_states);
  const auto* r = static_cast<const S*>(args.residual);
  const auto* pre = static_cast<const S*>(pre_summed);
  const auto* w = static_cast<const S*>(args.weight);
  auto* out = static_cast<S*>(args.output);
  auto* res_out = static_cast<S*>(args.residual_out);
  const bool writes_residual = WritesResidual(args.mode);

  float* sum = ThreadRowBuffers(hidden);
  float* weight = sum + hidden;
  std::size_t i = 0;
  for (; i < vector_end; i += lanes) hn::StoreU(T::Load(w + i), df, weight + i);
  for (; i < hidden; ++i) weight[i] = T::LoadOne(w[i]);

  auto row_sum = [&](std::size_t base, std::size_t j) {
    return pre != nullptr ? T::Load(pre + base + j) : T::Load(x + base + j) + T::Load(r + base + j);
  };
  for (std::int64_t row = 0; row < args.batch; ++row) {
    const std::size_t base = static_cast<std::size_t>(row) * hidden;
    // Two accumulators: the fp32 adds of one would be a latency chain.
    VF acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    std::size_t j = 0;
    for (; j < pair_end; j += 2 * lanes) {
      const VF s0 = row_sum(base, j);
      const VF s1 = row_sum(base, j + lanes);
      hn::StoreU(s0, df, sum + j);
      hn::StoreU(s1, df, sum + j + lanes);
      acc0 = hn::MulAdd(s0, s0, acc0);
      acc1 = hn::MulAdd(s1, s1, acc1);
    }
    for (; j < vector_end; j += lanes) {
      const VF s = row_sum(base, j);
      hn::StoreU(s, df, sum + j);
      acc0 = hn::MulAdd(s, s, acc0);
    }
    float sum_sq = hn::GetLane(hn::SumOfLanes(df, acc0 + acc1));
    for (; j < hidden; ++j) {
      const float s = pre != nullptr ? T::LoadOne(pre[base + j])
                                     : T::LoadOne(x[base + j]) + T::LoadOne(r[base + j]);
      sum[j] = s;
      sum_sq += s * s;
    }
    const float inv_rms = 1.f / std::sqrt(sum_sq / static_cast<float>(hidden) + args.eps);
    const VF inv = hn::Set(df, inv_rms);
    S* row_out = out + base;
    S* row_res = writes_residual ? res_out + base : nullptr;
    auto store_one = [&](std::size_t k) {
      if (writes_residual) row_res[k] = T::StoreOne(sum[k]);
      row_out[k] = T::StoreOne(sum[k] * inv_rms * weight[k]);
    };
    // Streaming: scalar stores up to the first aligned element, whole vectors after it.
    const std::size_t first = stream ? StreamStart<T>(row_out, row_res, hidden) : 0;
    const std::size_t stop = first + (hidden - first) / lanes * lanes;
    for (j = 0; j < first; ++j) store_one(j);
    for (; j < stop; j += lanes) {
      const VF s = hn::LoadU(df, sum + j);
      const VF o = s * inv * hn::LoadU(df, weight + j);
      if (stream) {
        if (writes_residual) hn::Stream(T::Narrow(s), typename T::DP(), row_res + j);
        hn::Stream(T::Narrow(o), typename T::DP(), row_out + j);
      } else {
        if (writes_residual) T::Store(s, row_res + j);
        T::Store(o, row_out + j);
      }
    }
    for (; j < hidden; ++j) store_one(j);
  }
  // Non-temporal stores are weakly ordered: make them visible before the call returns.
  if (stream) hwy::FlushStream();
}

void FusedRows(const FusedAddRmsNormArgs& args, bool stream) {
  DispatchDType(args.dtype, [&](auto t) { NormalizeRows<decltype(t)>(args, nullptr, stream); });
}

void UnfusedAddRows(const FusedAddRmsNormArgs& args, void* sum_out) {
  DispatchDType(args.dtype, [&](auto t) {
    using T = decltype(t);
    using S = typename T::Storage;
    const std::size_t lanes = hn::Lanes(DF());
    const std::size_t n =
        static_cast<std::size_t>(args.batch) * static_cast<std::size_t>(args.hidden);
    const auto* x = static_cast<const S*>(args.hidden_states);
    const auto* r = static_cast<const S*>(args.residual);
    auto* sum = static_cast<S*>(sum_out);
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) T::Store(T::Load(x + i) + T::Load(r + i), sum + i);
    for (; i < n; ++i) sum[i] = T::StoreOne(T::LoadOne(x[i]) + T::LoadOne(r[i]));
  });
}

void UnfusedNormRows(const FusedAddRmsNormArgs& args, void* sum) {
  DispatchDType(args.dtype, [&](auto t) { NormalizeRows<decltype(t)>(args, sum, false); });
}

void ToFloat(DType dtype, const void* in, float* out, std::size_t n) {
  DispatchDType(dtype, [&](auto t) {
    using T = decltype(t);
    const auto* src = static_cast<const typename T::Storage*>(in);
    const std::size_t lanes = hn::Lanes(DF());
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(T::Load(src + i), DF(), out + i);
    for (; i < n; ++i) out[i] = T::LoadOne(src[i]);
  });
}

void FromFloat(DType dtype, const float* in, void* out, std::size_t n) {
  DispatchDType(dtype, [&](auto t) {
    using T = decltype(t);
    auto* dst = static_cast<typename T::Storage*>(out);
    const std::size_t lanes = hn::Lanes(DF());
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) T::Store(hn::LoadU(DF(), in + i), dst + i);
    for (; i < n; ++i) dst[i] = T::StoreOne(in[i]);
  });
}

const char* SimdTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace kerneleval
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kerneleval {

HWY_EXPORT(FusedRows);
HWY_EXPORT(UnfusedAddRows);
HWY_EXPORT(UnfusedNormRows);
HWY_EXPORT(ToFloat);
HWY_EXPORT(FromFloat);
HWY_EXPORT(SimdTargetName);

namespace {

// Rows per task: about 64 KiB of each row tensor, so that a task is long against the cost of
// claiming it and rows spread evenly; small calls stay on the calling thread (see
// kMinParallelBytes).
std::int64_t RowsPerTask(const FusedAddRmsNormArgs& args) {
  const std::size_t row_bytes = static_cast<std::size_t>(args.hidden) * ElementSize(args.dtype);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>((std::size_t{64} << 10) / row_bytes));
}

// Below this many bytes moved, a second thread cannot pay for waking it: a condition-variable
// wake and a context switch cost 5-20 us, and one core moves 256 KiB in about 13 us at the
// 20 GB/s it reaches here (docs/results/cpu-backend.md). An estimate, not a measured
// crossover: on the shared results machine the second core was never free enough to find one.
constexpr std::uint64_t kMinParallelBytes = std::uint64_t{256} << 10;

// From this many bytes per [batch, hidden] tensor on, the fused kernel's stores bypass the
// caches (non-temporal): the output cannot stay cached for the next call anyway (three such
// tensors exceed the 32 MiB L3 of the results machine and most server L3 slices), and a
// store that misses would first read its line (read for ownership), a third more memory
// traffic in MODE_OUTPUT. Measured in docs/results/cpu-backend.md.
constexpr std::uint64_t kStreamTensorBytes = std::uint64_t{16} << 20;

FusedAddRmsNormArgs RowsOf(const FusedAddRmsNormArgs& args, std::int64_t begin, std::int64_t end) {
  const std::size_t offset = static_cast<std::size_t>(begin) *
                             static_cast<std::size_t>(args.hidden) * ElementSize(args.dtype);
  auto shift = [offset](auto* p) { return p == nullptr ? p : p + offset; };
  FusedAddRmsNormArgs a = args;
  a.batch = end - begin;
  a.hidden_states = shift(static_cast<const unsigned char*>(args.hidden_states));
  a.residual = shift(static_cast<const unsigned char*>(args.residual));
  a.output = shift(static_cast<unsigned char*>(args.output));
  a.residual_out = shift(static_cast<unsigned char*>(args.residual_out));
  return a;
}

// Calls f(rows) over row blocks of `args`, spread over `threads` when the call is large.
template <typename F>
void ForRowBlocks(const FusedAddRmsNormArgs& args, CpuThreadPool* threads, F&& f) {
  if (args.batch <= 0 || args.hidden <= 0) return;
  if (threads == nullptr || threads->size() == 1 ||
      BytesMoved(args.dtype, args.mode, args.batch, args.hidden) < kMinParallelBytes) {
    f(args, std::int64_t{0});
    return;
  }
  const std::int64_t per_task = RowsPerTask(args);
  const auto tasks = static_cast<std::size_t>((args.batch + per_task - 1) / per_task);
  threads->ParallelFor(tasks, [&](std::size_t t) {
    const auto begin = static_cast<std::int64_t>(t) * per_task;
    f(RowsOf(args, begin, std::min(args.batch, begin + per_task)), begin);
  });
}

}  // namespace

void FusedAddRmsNormCpu(const FusedAddRmsNormArgs& args, CpuThreadPool* threads) {
  const bool stream = static_cast<std::uint64_t>(args.batch) *
                          static_cast<std::uint64_t>(args.hidden) * ElementSize(args.dtype) >=
                      kStreamTensorBytes;
  ForRowBlocks(args, threads, [stream](const FusedAddRmsNormArgs& rows, std::int64_t) {
    HWY_DYNAMIC_DISPATCH(FusedRows)(rows, stream);
  });
}

void UnfusedAddRmsNormCpu(const FusedAddRmsNormArgs& args, void* scratch, CpuThreadPool* threads) {
  // Two passes over the whole tensor, as an eager framework runs them: every row's rounded
  // sum is written before any row is normalized.
  const std::size_t row_bytes = static_cast<std::size_t>(args.hidden) * ElementSize(args.dtype);
  auto* sum = static_cast<unsigned char*>(scratch);
  ForRowBlocks(args, threads, [&](const FusedAddRmsNormArgs& rows, std::int64_t begin) {
    HWY_DYNAMIC_DISPATCH(UnfusedAddRows)(rows, sum + static_cast<std::size_t>(begin) * row_bytes);
  });
  ForRowBlocks(args, threads, [&](const FusedAddRmsNormArgs& rows, std::int64_t begin) {
    HWY_DYNAMIC_DISPATCH(UnfusedNormRows)(rows, sum + static_cast<std::size_t>(begin) * row_bytes);
  });
}

void CpuToFloat(DType dtype, const void* in, float* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ToFloat)(dtype, in, out, n);
}

void CpuFromFloat(DType dtype, const float* in, void* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(FromFloat)(dtype, in, out, n);
}

const char* CpuSimdTarget() { return HWY_DYNAMIC_DISPATCH(SimdTargetName)(); }

}  // namespace kerneleval
#endif  // HWY_ONCE
