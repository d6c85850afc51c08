// Building request tensors: raw little-endian row-major bytes with a dtype and a shape, as the
// wire contract defines them, and the deterministic inputs the server's suites use
// (common/input_generator.h), so that a seed means the same tensors on both sides.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

namespace v1 = ::kerneleval::v1;

// Takes `bytes` as the tensor's data; the caller keeps size == prod(shape) * dtype size.
v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

// Standard-normal elements from common/input_generator.h: the bytes RandomTensor(dtype,
// prod(shape), seed) gives the server. An empty tensor for an unknown dtype.
v1::Tensor RandomTensor(v1::DType dtype, std::vector<int64_t> shape, uint64_t seed);

// The three inputs of workload 0 of a suite run with `seed`: hidden_states, residual and
// weight from DeriveSeed(seed, name, 0), exactly as the server generates them.
void SetRandomInputs(v1::DType dtype, int64_t batch, int64_t hidden, uint64_t seed,
                     v1::RunRequest* request);

// prod(shape) * dtype size, or nullopt for a negative dimension, an overflow or an unknown
// dtype.
std::optional<int64_t> ExpectedBytes(v1::DType dtype, const std::vector<int64_t>& shape);

}  // namespace kerneleval::client
