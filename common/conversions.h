// Between the wire contract's enums (kerneleval.v1) and the kernels' enums; the names
// people type and read come from common/enum_names.h, included here for the callers that
// need both. Every layer converts through these; nothing else spells these tables.
//
// Pure functions; safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval {

// Wire <-> kernel enums. The FromProto functions are checked: DTYPE_UNSPECIFIED and values
// outside the enum (an old or hostile client) are INVALID_ARGUMENT naming `field`;
// MODE_UNSPECIFIED means MODE_OUTPUT, as the contract says.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, absl::string_view field);
v1::DType DTypeToProto(DType dtype);
absl::StatusOr<Mode> ModeFromProto(v1::Mode mode, absl::string_view field);
v1::Mode ModeToProto(Mode mode);

// Bytes per element of a wire dtype; 0 for DTYPE_UNSPECIFIED or an unknown value.
std::uint64_t DTypeSize(v1::DType dtype);

// The suite-file spelling of a dtype (FlashInfer-Bench's): "bfloat16", "float16", "float32".
std::string DTypeFileName(v1::DType dtype);

}  // namespace kerneleval
