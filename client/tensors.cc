#include "client/tensors.h"

#include <cmath>
#include <limits>

#include "kerneleval/kernels/half_types.h"

namespace kerneleval::client {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so the logarithm below is finite.
double Uniform(uint64_t* state) {
  return (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

int64_t DTypeSize(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BF16:
    case v1::DTYPE_FP16:
      return 2;
    case v1::DTYPE_FP32:
      return 4;
    default:
      return 0;
  }
}

v1::DType ToProto(::kerneleval::DType dtype) {
  switch (dtype) {
    case ::kerneleval::DType::kBF16:
      return v1::DTYPE_BF16;
    case ::kerneleval::DType::kFP16:
      return v1::DTYPE_FP16;
    case ::kerneleval::DType::kFP32:
      return v1::DTYPE_FP32;
  }
  return v1::DTYPE_UNSPECIFIED;
}

std::optional<::kerneleval::DType> FromProto(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BF16:
      return ::kerneleval::DType::kBF16;
    case v1::DTYPE_FP16:
      return ::kerneleval::DType::kFP16;
    case v1::DTYPE_FP32:
      return ::kerneleval::DType::kFP32;
    default:
      return std::nullopt;
  }
}

std::optional<v1::DType> ParseDType(std::string_view name) {
  if (name == "bf16" || name == "bfloat16") return v1::DTYPE_BF16;
  if (name == "fp16" || name == "float16" || name == "half") return v1::DTYPE_FP16;
  if (name == "fp32" || name == "float32" || name == "float") return v1::DTYPE_FP32;
  return std::nullopt;
}

std::optional<v1::Mode> ParseMode(std::string_view name) {
  if (name == "output") return v1::MODE_OUTPUT;
  if (name == "output_and_residual") return v1::MODE_OUTPUT_AND_RESIDUAL;
  if (name == "in_place") return v1::MODE_IN_PLACE;
  return std::nullopt;
}

std::string DTypeName(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BF16:
      return "bf16";
    case v1::DTYPE_FP16:
      return "fp16";
    case v1::DTYPE_FP32:
      return "fp32";
    default:
      return "unspecified";
  }
}

std::string ModeName(v1::Mode mode) {
  switch (mode) {
    case v1::MODE_OUTPUT_AND_RESIDUAL:
      return "output_and_residual";
    case v1::MODE_IN_PLACE:
      return "in_place";
    default:  // MODE_UNSPECIFIED is treated as MODE_OUTPUT by the contract.
      return "output";
  }
}

v1::Tensor MakeTensor(::kerneleval::DType dtype, std::vector<int64_t> shape,
                      std::vector<uint8_t> bytes) {
  return MakeTensor(ToProto(dtype), std::move(shape), std::move(bytes));
}

v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (int64_t d : shape) tensor.add_shape(d);
  tensor.set_data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return tensor;
}

std::optional<int64_t> ExpectedBytes(v1::DType dtype, const std::vector<int64_t>& shape) {
  int64_t bytes = DTypeSize(dtype);
  if (bytes == 0) return std::nullopt;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

v1::Tensor RandomTensor(v1::DType dtype, std::vector<int64_t> shape, uint64_t seed, float mean,
                        float stddev) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (int64_t d : shape) tensor.add_shape(d);
  const std::optional<::kerneleval::DType> kernel_dtype = FromProto(dtype);
  const std::optional<int64_t> bytes = ExpectedBytes(dtype, shape);
  if (!kernel_dtype || !bytes) return tensor;
  std::string* data = tensor.mutable_data();
  data->resize(static_cast<size_t>(*bytes));
  const size_t count = static_cast<size_t>(*bytes / DTypeSize(dtype));
  uint64_t state = seed;
  constexpr double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < count; i += 2) {
    // Box-Muller gives two independent normals per pair of uniforms.
    const double radius = std::sqrt(-2.0 * std::log(Uniform(&state)));
    const double angle = kTwoPi * Uniform(&state);
    StoreFromFloat(*kernel_dtype, data->data(), i,
                   static_cast<float>(mean + stddev * radius * std::cos(angle)));
    if (i + 1 < count) {
      StoreFromFloat(*kernel_dtype, data->data(), i + 1,
                     static_cast<float>(mean + stddev * radius * std::sin(angle)));
    }
  }
  return tensor;
}

}  // namespace kerneleval::client
