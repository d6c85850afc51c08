#include "common/conversions.h"

#include "absl/strings/str_cat.h"

namespace kerneleval {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, absl::string_view field) {
  switch (dtype) {
    case v1::DTYPE_BF16:
      return DType::kBF16;
    case v1::DTYPE_FP16:
      return DType::kFP16;
    case v1::DTYPE_FP32:
      return DType::kFP32;
    case v1::DTYPE_UNSPECIFIED:
      return Invalid(field, "required (DTYPE_BF16, DTYPE_FP16 or DTYPE_FP32)");
    default:
      return Invalid(field, absl::StrCat("unknown dtype value ", static_cast<int>(dtype)));
  }
}

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return v1::DTYPE_BF16;
    case DType::kFP16:
      return v1::DTYPE_FP16;
    case DType::kFP32:
      return v1::DTYPE_FP32;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::StatusOr<Mode> ModeFromProto(v1::Mode mode, absl::string_view field) {
  switch (mode) {
    case v1::MODE_UNSPECIFIED:
    case v1::MODE_OUTPUT:
      return Mode::kOutput;
    case v1::MODE_OUTPUT_AND_RESIDUAL:
      return Mode::kOutputAndResidual;
    case v1::MODE_IN_PLACE:
      return Mode::kInPlace;
    default:
      return Invalid(field, absl::StrCat("unknown mode value ", static_cast<int>(mode)));
  }
}

v1::Mode ModeToProto(Mode mode) {
  switch (mode) {
    case Mode::kOutput:
      return v1::MODE_OUTPUT;
    case Mode::kOutputAndResidual:
      return v1::MODE_OUTPUT_AND_RESIDUAL;
    case Mode::kInPlace:
      return v1::MODE_IN_PLACE;
  }
  return v1::MODE_UNSPECIFIED;
}

std::uint64_t DTypeSize(v1::DType dtype) {
  const absl::StatusOr<DType> d = DTypeFromProto(dtype, "");
  return d.ok() ? ElementSize(*d) : 0;
}

std::string DTypeFileName(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BF16:
      return "bfloat16";
    case v1::DTYPE_FP16:
      return "float16";
    case v1::DTYPE_FP32:
      return "float32";
    default:
      return "unspecified";
  }
}

}  // namespace kerneleval
