// Reading and writing safetensors files (https://huggingface.co/docs/safetensors):
//
//   u64 little-endian N | N bytes of JSON header | data
//   header = {"<name>": {"dtype": "BF16"|"F16"|"F32", "shape": [...],
//                        "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
//
// Offsets are relative to the start of the data section. Only the three dtypes the service
// computes in are accepted. Parsing is strict, as the reference implementation is: every
// tensor's byte size must equal prod(shape) x dtype size, tensors may neither overlap nor
// leave gaps, and together they must cover the data section exactly. No function throws.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

struct SafetensorsFile {
  std::map<std::string, kerneleval::v1::Tensor> tensors;  // Written in name order.
  std::map<std::string, std::string> metadata;            // "__metadata__"; may be empty.
};

// Errors are INVALID_ARGUMENT (or DATA_LOSS for truncation) with a message naming the tensor
// and the rule it breaks.
absl::StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes);
// Adds NOT_FOUND / PERMISSION_DENIED-style errors for a file that cannot be read.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

// Fails when a tensor's data size does not match its shape and dtype, or its dtype is unset.
// The header is padded with spaces to a multiple of 8 bytes so that the data is aligned.
absl::StatusOr<std::string> SerializeSafetensors(const SafetensorsFile& file);
absl::Status WriteSafetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace kerneleval::client
