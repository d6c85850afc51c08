// The one table between the wire contract's enums (kerneleval.v1), the kernels' enums and
// the names people type and read ("bf16", "bfloat16", "output_and_residual", "cupti").
// Every layer converts through here; nothing else spells these tables.
//
// Pure functions; safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// Short names for tables, labels and flags: "bf16", "fp16", "fp32"; "output",
// "output_and_residual", "in_place"; "cupti", "cuda_events", "host_clock"; "cold", "hot".
std::string DTypeShortName(v1::DType dtype);
std::string ModeShortName(v1::Mode mode);
std::string TimerShortName(v1::Timer timer);
std::string CacheShortName(v1::CacheMode cache);
// A SOL figure's peak, as reports and metric labels name it: "device_attributes",
// "datasheet", "measured_copy".
std::string PeakSourceShortName(v1::PeakSource source);

// What people type: the short names, and the long ones of suite files and frameworks
// ("bfloat16", "float16", "half", "float32", "float"). nullopt for anything else.
std::optional<v1::DType> ParseDTypeName(std::string_view name);
std::optional<v1::Mode> ParseModeName(std::string_view name);

// The suite-file spelling of a dtype (FlashInfer-Bench's): "bfloat16", "float16", "float32".
std::string DTypeFileName(v1::DType dtype);

}  // namespace kerneleval
