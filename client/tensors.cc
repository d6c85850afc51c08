#include "client/tensors.h"

#include <limits>

#include "common/conversions.h"
#include "common/input_generator.h"

namespace kerneleval::client {

v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (int64_t d : shape) tensor.add_shape(d);
  tensor.set_data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return tensor;
}

v1::Tensor RandomTensor(v1::DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  const absl::StatusOr<DType> kernel_dtype = DTypeFromProto(dtype, "dtype");
  const std::optional<int64_t> bytes = ExpectedBytes(dtype, shape);
  if (!kernel_dtype.ok() || !bytes) return MakeTensor(dtype, std::move(shape), {});
  const auto elements = static_cast<std::size_t>(*bytes) / ElementSize(*kernel_dtype);
  return MakeTensor(dtype, std::move(shape),
                    ::kerneleval::RandomTensor(*kernel_dtype, elements, seed));
}

void SetRandomInputs(v1::DType dtype, int64_t batch, int64_t hidden, uint64_t seed,
                     v1::RunRequest* request) {
  *request->mutable_hidden_states() =
      RandomTensor(dtype, {batch, hidden}, DeriveSeed(seed, "hidden_states", 0));
  *request->mutable_residual() =
      RandomTensor(dtype, {batch, hidden}, DeriveSeed(seed, "residual", 0));
  *request->mutable_weight() = RandomTensor(dtype, {hidden}, DeriveSeed(seed, "weight", 0));
}

std::optional<int64_t> ExpectedBytes(v1::DType dtype, const std::vector<int64_t>& shape) {
  auto bytes = static_cast<int64_t>(DTypeSize(dtype));
  if (bytes == 0) return std::nullopt;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

}  // namespace kerneleval::client
