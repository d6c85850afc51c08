// Building request tensors: raw little-endian row-major bytes with a dtype and a shape, as the
// wire contract defines them, and deterministic random inputs for the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

namespace v1 = ::kerneleval::v1;

// Bytes per element; 0 for DTYPE_UNSPECIFIED.
int64_t DTypeSize(v1::DType dtype);
v1::DType ToProto(::kerneleval::DType dtype);
// nullopt for DTYPE_UNSPECIFIED.
std::optional<::kerneleval::DType> FromProto(v1::DType dtype);

// "bf16" | "fp16" | "fp32" (also "bfloat16", "float16", "half", "float32", "float").
std::optional<v1::DType> ParseDType(std::string_view name);
// "output" | "output_and_residual" | "in_place".
std::optional<v1::Mode> ParseMode(std::string_view name);
// Short lower-case names for tables: "bf16", "output_and_residual", ...
std::string DTypeName(v1::DType dtype);
std::string ModeName(v1::Mode mode);

// Takes `bytes` as the tensor's data; the caller keeps size == prod(shape) * dtype size.
v1::Tensor MakeTensor(::kerneleval::DType dtype, std::vector<int64_t> shape,
                      std::vector<uint8_t> bytes);
v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

// Elements drawn from N(mean, stddev), rounded once to the dtype. The stream depends only on
// `seed` (splitmix64 + Box-Muller), so every machine and build produces the same tensor.
v1::Tensor RandomTensor(v1::DType dtype, std::vector<int64_t> shape, uint64_t seed,
                        float mean = 0.0f, float stddev = 1.0f);

// prod(shape) * dtype size, or nullopt for a negative dimension, an overflow or an unknown
// dtype.
std::optional<int64_t> ExpectedBytes(v1::DType dtype, const std::vector<int64_t>& shape);

}  // namespace kerneleval::client
