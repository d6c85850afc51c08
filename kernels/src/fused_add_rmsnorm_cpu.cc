#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP16:
      return "fp16";
    case DType::kFP32:
      return "fp32";
  }
  return "unknown";
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kOutput:
      return "output";
    case Mode::kOutputAndResidual:
      return "output_and_residual";
    case Mode::kInPlace:
      return "in_place";
  }
  return "unknown";
}

std::uint64_t BytesMoved(DType dtype, Mode mode, std::int64_t batch, std::int64_t hidden) {
  const std::uint64_t row_tensors = WritesResidual(mode) ? 4 : 3;
  const auto elements =
      row_tensors * static_cast<std::uint64_t>(batch) * static_cast<std::uint64_t>(hidden) +
      static_cast<std::uint64_t>(hidden);
  return elements * ElementSize(dtype);
}

namespace {

// Storage types with their conversions; the dtype switch happens once per call, not per
// element, so the inner loops vectorize.
struct Bf16 {
  using Storage = std::uint16_t;
  static float Load(Storage v) { return Bf16ToFloat(v); }
  static Storage Store(float v) { return FloatToBf16(v); }
};
struct Fp16 {
  using Storage = std::uint16_t;
  static float Load(Storage v) { return Fp16ToFloat(v); }
  static Storage Store(float v) { return FloatToFp16(v); }
};
struct Fp32 {
  using Storage = float;
  static float Load(Storage v) { return v; }
  static Storage Store(float v) { return v; }
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

// One row at a time: the row's fp32 sum lives in `sum` so that in-place aliasing is safe
// (every input element of the row is read before any element of the row is written).
// With `sum_src` set, the row sum is read from it instead of being computed (unfused pass 2).
template <typename T>
void NormalizeRows(const FusedAddRmsNormArgs& args, const void* sum_src) {
  using S = typename T::Storage;
  const auto hidden = static_cast<std::size_t>(args.hidden);
  const auto* x = static_cast<const S*>(args.hidden_states);
  const auto* r = static_cast<const S*>(args.residual);
  const auto* pre = static_cast<const S*>(sum_src);
  auto* out = static_cast<S*>(args.output);
  auto* res_out = static_cast<S*>(args.residual_out);
  std::vector<float> weight(hidden);
  for (std::size_t i = 0; i < hidden; ++i)
    weight[i] = T::Load(static_cast<const S*>(args.weight)[i]);
  std::vector<float> sum(hidden);
  for (std::int64_t row = 0; row < args.batch; ++row) {
    const std::size_t base = static_cast<std::size_t>(row) * hidden;
    float sum_sq = 0.f;
    for (std::size_t i = 0; i < hidden; ++i) {
      const float s =
          pre != nullptr ? T::Load(pre[base + i]) : T::Load(x[base + i]) + T::Load(r[base + i]);
      sum[i] = s;
      sum_sq += s * s;
    }
    const float inv_rms = 1.f / std::sqrt(sum_sq / static_cast<float>(hidden) + args.eps);
    if (WritesResidual(args.mode)) {
      for (std::size_t i = 0; i < hidden; ++i) res_out[base + i] = T::Store(sum[i]);
    }
    for (std::size_t i = 0; i < hidden; ++i) out[base + i] = T::Store(sum[i] * inv_rms * weight[i]);
  }
}

}  // namespace

void FusedAddRmsNormCpu(const FusedAddRmsNormArgs& args) {
  DispatchDType(args.dtype, [&](auto t) { NormalizeRows<decltype(t)>(args, nullptr); });
}

void UnfusedAddRmsNormCpu(const FusedAddRmsNormArgs& args, void* scratch) {
  DispatchDType(args.dtype, [&](auto t) {
    using T = decltype(t);
    using S = typename T::Storage;
    const std::size_t n =
        static_cast<std::size_t>(args.batch) * static_cast<std::size_t>(args.hidden);
    const auto* x = static_cast<const S*>(args.hidden_states);
    const auto* r = static_cast<const S*>(args.residual);
    auto* sum = static_cast<S*>(scratch);
    for (std::size_t i = 0; i < n; ++i) sum[i] = T::Store(T::Load(x[i]) + T::Load(r[i]));
    NormalizeRows<T>(args, scratch);
  });
}

void FusedAddRmsNormReference(DType dtype, std::int64_t batch, std::int64_t hidden, double eps,
                              const void* hidden_states, const void* residual, const void* weight,
                              double* out, double* res) {
  const auto h = static_cast<std::size_t>(hidden);
  std::vector<double> s(h);
  for (std::int64_t row = 0; row < batch; ++row) {
    const std::size_t base = static_cast<std::size_t>(row) * h;
    double sum_sq = 0.0;
    for (std::size_t i = 0; i < h; ++i) {
      s[i] = static_cast<double>(LoadAsFloat(dtype, hidden_states, base + i)) +
             static_cast<double>(LoadAsFloat(dtype, residual, base + i));
      sum_sq += s[i] * s[i];
    }
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(h) + eps);
    for (std::size_t i = 0; i < h; ++i) {
      out[base + i] = s[i] * inv_rms * static_cast<double>(LoadAsFloat(dtype, weight, i));
      if (res != nullptr) res[base + i] = s[i];
    }
  }
}

}  // namespace kerneleval
