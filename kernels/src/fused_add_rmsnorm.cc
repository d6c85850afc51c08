// The operation's names and byte count, and its fp64 reference (the oracle every
// implementation is checked against; kept simple on purpose, not fast).
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
