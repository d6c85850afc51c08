#include "client/npy.h"

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/tensors.h"

namespace kerneleval::client {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": not a .npy file the service takes: ", why));
}

// The text after `'key':` up to the next ',' at depth 0 (a shape's tuple is one value).
std::optional<absl::string_view> Value(absl::string_view header, const std::string& key) {
  const std::string quoted = "'" + key + "':";
  const std::size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = header.substr(at + quoted.size());
  int depth = 0;
  std::size_t end = 0;
  for (; end < rest.size(); ++end) {
    if (rest[end] == '(') ++depth;
    if (rest[end] == ')') --depth;
    if ((rest[end] == ',' || rest[end] == '}') && depth == 0) break;
  }
  return absl::StripAsciiWhitespace(rest.substr(0, end));
}

}  // namespace

absl::StatusOr<v1::Tensor> ParseNpy(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return Bad(what, "no \\x93NUMPY magic");
  }
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_bytes = 0, offset = 0;
  if (major == 1) {
    header_bytes = static_cast<unsigned char>(bytes[8]) |
                   (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(what, "truncated header");
    for (int i = 3; i >= 0; --i) {
      header_bytes = (header_bytes << 8) | static_cast<unsigned char>(bytes[8 + i]);
    }
    offset = 12;
  } else {
    return Bad(what, absl::StrCat("format version ", major, " (1, 2 or 3 are read)"));
  }
  if (header_bytes > bytes.size() - offset) return Bad(what, "truncated header");
  const absl::string_view header(bytes.data() + offset, header_bytes);
  const std::string_view data = bytes.substr(offset + header_bytes);

  const auto descr = Value(header, "descr");
  const auto order = Value(header, "fortran_order");
  const auto shape_text = Value(header, "shape");
  if (!descr || !order || !shape_text) return Bad(what, "header without descr, order or shape");
  v1::DType dtype;
  if (*descr == "'<f4'") {
    dtype = v1::DTYPE_FP32;
  } else if (*descr == "'<f2'") {
    dtype = v1::DTYPE_FP16;
  } else if (*descr == "'<V2'" || *descr == "'|V2'") {
    dtype = v1::DTYPE_BF16;
  } else {
    return Bad(what, absl::StrCat("dtype ", descr->substr(0, 16),
                                  "; float32 ('<f4'), float16 ('<f2') or ml_dtypes.bfloat16 "
                                  "('<V2') are taken"));
  }
  if (*order != "False") return Bad(what, "Fortran order; save a C-ordered array");
  const absl::string_view dims = *shape_text;
  if (dims.size() < 2 || dims.front() != '(' || dims.back() != ')') {
    return Bad(what, "shape is not a tuple");
  }
  std::vector<int64_t> shape;
  for (absl::string_view d :
       absl::StrSplit(dims.substr(1, dims.size() - 2), ',', absl::SkipWhitespace())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &n) || n < 0) {
      return Bad(what, "a dimension of the shape is not a whole number");
    }
    shape.push_back(n);
  }
  const std::optional<int64_t> expected = ExpectedBytes(dtype, shape);
  if (!expected || static_cast<std::size_t>(*expected) != data.size()) {
    return Bad(what,
               absl::StrCat(data.size(), " bytes of data for a shape of ", dims.substr(0, 48)));
  }
  return MakeTensor(dtype, std::move(shape), std::vector<uint8_t>(data.begin(), data.end()));
}

absl::StatusOr<v1::Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return ParseNpy(bytes.str(), path);
}

}  // namespace kerneleval::client
