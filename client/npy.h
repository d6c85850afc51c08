// Reading NumPy .npy files (format versions 1.0, 2.0 and 3.0, as np.save writes them):
//
//   "\x93NUMPY" | major | minor | header length (u16 in 1.0, u32 in 2.0 / 3.0) | header | data
//   header = {'descr': '<f4', 'fortran_order': False, 'shape': (79, 2048), }
//
// Only the three dtypes the service computes in: '<f4' (fp32), '<f2' (fp16), and '<V2' or
// '|V2', which is how np.save writes ml_dtypes.bfloat16 (NumPy has no name for it; the
// service's only 2-byte type that is not '<f2'). C order only. No function throws.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

// INVALID_ARGUMENT naming `what` (the file) and the rule broken: a bad magic or header, a
// dtype the service does not take, Fortran order, or data that is not prod(shape) x dtype
// size bytes.
absl::StatusOr<kerneleval::v1::Tensor> ParseNpy(std::string_view bytes, const std::string& what);
// NOT_FOUND for a file that cannot be read.
absl::StatusOr<kerneleval::v1::Tensor> ReadNpy(const std::string& path);

}  // namespace kerneleval::client
