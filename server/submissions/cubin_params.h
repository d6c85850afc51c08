// A kernel's parameters as the assembled module records them, read from the cubin on the CPU
// with no GPU: the EIATTR_KPARAM_INFO attributes of its .nv.info.<symbol> section, the same
// records the driver reads at launch (cuFuncGetParamInfo). Registration checks the binding
// against them as well as against the PTX's declarations, so that what the service fills per
// launch matches the module that runs, not only the text it was assembled from.
//
// The .nv.info format (undocumented, stable since Kepler): a sequence of attributes, each a
// 4-byte header {u8 format, u8 attribute, u16 value-or-size}, followed by `size` bytes for
// format EIFMT_SVAL (4). KPARAM_INFO (attribute 0x17) carries 12 bytes: u32 index, u16
// ordinal, u16 offset in the parameter bank, u32 whose bits 18..31 are the size in bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval::server::submissions {

struct CubinParam {
  std::uint32_t offset = 0;  // in the kernel's parameter bank
  std::uint32_t bytes = 0;
};

// The parameters of kernel `symbol` (its lowered name) by ordinal. INVALID_ARGUMENT naming
// submission.source where the cubin is malformed, has no .nv.info section for `symbol`, or its
// records do not number the parameters 0..n-1 once each.
absl::StatusOr<std::vector<CubinParam>> CubinKernelParams(absl::string_view cubin,
                                                          absl::string_view symbol);

}  // namespace kerneleval::server::submissions
