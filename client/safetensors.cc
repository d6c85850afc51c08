#include "client/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/tensors.h"

namespace kerneleval::client {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr char kMetadataKey[] = "__metadata__";

std::optional<v1::DType> DTypeFromName(const std::string& name) {
  if (name == "BF16") return v1::DTYPE_BF16;
  if (name == "F16") return v1::DTYPE_FP16;
  if (name == "F32") return v1::DTYPE_FP32;
  return std::nullopt;
}

const char* DTypeToName(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BF16:
      return "BF16";
    case v1::DTYPE_FP16:
      return "F16";
    case v1::DTYPE_FP32:
      return "F32";
    default:
      return nullptr;
  }
}

absl::Status Invalid(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name, "': ", what));
}

// A JSON integer in [0, 2^63).
std::optional<int64_t> NonNegative(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

struct Entry {
  std::string name;
  v1::DType dtype;
  std::vector<int64_t> shape;
  int64_t begin;
  int64_t end;
};

absl::StatusOr<Entry> ParseEntry(const std::string& name, const json& info) {
  if (!info.is_object()) return Invalid(name, "entry is not an object");
  Entry entry{name, v1::DTYPE_UNSPECIFIED, {}, 0, 0};
  const auto dtype = info.find("dtype");
  if (dtype == info.end() || !dtype->is_string()) return Invalid(name, "missing string 'dtype'");
  const std::optional<v1::DType> parsed = DTypeFromName(dtype->get<std::string>());
  if (!parsed) {
    return Invalid(name, absl::StrCat("unsupported dtype '", dtype->get<std::string>(),
                                      "' (BF16, F16 or F32)"));
  }
  entry.dtype = *parsed;
  const auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array()) return Invalid(name, "missing array 'shape'");
  for (const json& dim : *shape) {
    const std::optional<int64_t> d = NonNegative(dim);
    if (!d) return Invalid(name, "shape holds a value that is not a non-negative integer");
    entry.shape.push_back(*d);
  }
  const auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2) {
    return Invalid(name, "missing 'data_offsets' [begin, end]");
  }
  const std::optional<int64_t> begin = NonNegative((*offsets)[0]);
  const std::optional<int64_t> end = NonNegative((*offsets)[1]);
  if (!begin || !end || *end < *begin) {
    return Invalid(name, "data_offsets must be integers with 0 <= begin <= end");
  }
  entry.begin = *begin;
  entry.end = *end;
  const std::optional<int64_t> expected = ExpectedBytes(entry.dtype, entry.shape);
  if (!expected) return Invalid(name, "shape too large");
  if (*expected != entry.end - entry.begin) {
    return Invalid(name, absl::StrCat("byte size ", entry.end - entry.begin,
                                      " != prod(shape) x dtype size = ", *expected));
  }
  return entry;
}

absl::Status ParseMetadata(const json& value, std::map<std::string, std::string>* metadata) {
  if (!value.is_object())
    return absl::InvalidArgumentError("safetensors: __metadata__ is not an object");
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: __metadata__ value of '", key, "' is not a string"));
    }
    (*metadata)[key] = item.get<std::string>();
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsFile> ParseImpl(std::string_view bytes) {
  if (bytes.size() < 8) {
    return absl::DataLossError(absl::StrCat("safetensors: truncated file: ", bytes.size(),
                                            " bytes, fewer than the 8-byte header length"));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = header_size << 8 | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  }
  const uint64_t available = bytes.size() - 8;
  if (header_size > available) {
    return absl::DataLossError(absl::StrCat("safetensors: header length ", header_size,
                                            " is beyond the file (", available,
                                            " bytes follow the length)"));
  }
  if (header_size > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: header length ", header_size, " exceeds 100 MB"));
  }
  const std::string_view header_text = bytes.substr(8, header_size);
  const json header = json::parse(header_text.begin(), header_text.end(), nullptr,
                                  /*allow_exceptions=*/false);
  if (header.is_discarded()) return absl::InvalidArgumentError("safetensors: header is not JSON");
  if (!header.is_object()) {
    return absl::InvalidArgumentError("safetensors: header is not a JSON object");
  }

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      absl::Status status = ParseMetadata(info, &file.metadata);
      if (!status.ok()) return status;
      continue;
    }
    absl::StatusOr<Entry> entry = ParseEntry(name, info);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }

  const int64_t data_size = static_cast<int64_t>(available - header_size);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  int64_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.end > data_size) {
      return Invalid(e.name,
                     absl::StrCat("data_offsets [", e.begin, ", ", e.end,
                                  "] out of range: the data section has ", data_size, " bytes"));
    }
    if (e.begin < covered) {
      return Invalid(e.name, absl::StrCat("data_offsets [", e.begin, ", ", e.end,
                                          "] overlap tensor '", entries[i - 1].name, "'"));
    }
    if (e.begin > covered) {
      return Invalid(e.name,
                     absl::StrCat("gap of ", e.begin - covered, " bytes before its data_offsets"));
    }
    covered = e.end;
  }
  if (covered != data_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: tensors cover ", covered, " of the ", data_size, " data bytes"));
  }

  const std::string_view data = bytes.substr(8 + header_size);
  for (const Entry& e : entries) {
    v1::Tensor& tensor = file.tensors[e.name];
    tensor.set_dtype(e.dtype);
    for (int64_t d : e.shape) tensor.add_shape(d);
    tensor.set_data(data.data() + e.begin, static_cast<size_t>(e.end - e.begin));
  }
  return file;
}

}  // namespace

absl::StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes) {
  // nlohmann_json can still throw on allocation failure; nothing may escape.
  try {
    return ParseImpl(bytes);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: ", e.what()));
  }
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(buffer.str());
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

absl::StatusOr<std::string> SerializeSafetensors(const SafetensorsFile& file) {
  try {
    json header = json::object();
    if (!file.metadata.empty()) header[kMetadataKey] = file.metadata;
    int64_t offset = 0;
    for (const auto& [name, tensor] : file.tensors) {
      if (name == kMetadataKey) return Invalid(name, "reserved name");
      const char* dtype = DTypeToName(tensor.dtype());
      if (dtype == nullptr) return Invalid(name, "dtype is not BF16, F16 or F32");
      const std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
      const std::optional<int64_t> expected = ExpectedBytes(tensor.dtype(), shape);
      if (!expected || *expected != static_cast<int64_t>(tensor.data().size())) {
        return Invalid(
            name, absl::StrCat("data holds ", tensor.data().size(), " bytes; shape and dtype need ",
                               expected ? *expected : -1));
      }
      header[name] = {
          {"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, offset + *expected}}};
      offset += *expected;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out;
    out.reserve(8 + text.size() + static_cast<size_t>(offset));
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(text.size() >> (8 * i) & 0xff));
    out += text;
    for (const auto& [name, tensor] : file.tensors) out += tensor.data();
    return out;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: ", e.what()));
  }
}

absl::Status WriteSafetensors(const std::string& path, const SafetensorsFile& file) {
  absl::StatusOr<std::string> bytes = SerializeSafetensors(file);
  if (!bytes.ok()) return bytes.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot create '", path, "'"));
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace kerneleval::client
