#include "common/bounded_text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kerneleval {

std::string Quote(std::string_view text, std::size_t max_chars) {
  std::string out = "'";
  const std::size_t shown = text.size() <= max_chars ? text.size() : max_chars;
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    }
  }
  if (shown < text.size()) {
    absl::StrAppend(&out, "...' (", text.size(), " bytes)");
  } else {
    out.push_back('\'');
  }
  return out;
}

std::string ShapeText(const google::protobuf::RepeatedField<std::int64_t>& shape) {
  constexpr int kMaxDims = 8;
  std::string out = "[";
  for (int i = 0; i < shape.size() && i < kMaxDims; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", shape.Get(i));
  }
  if (shape.size() > kMaxDims) {
    absl::StrAppend(&out, ", ...] (", shape.size(), " dims)");
  } else {
    out.push_back(']');
  }
  return out;
}

}  // namespace kerneleval
