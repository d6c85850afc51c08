// safetensors: a round trip, and one test per rule a malformed file can break.
#include "client/safetensors.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "client/tensors.h"

namespace kerneleval::client {
namespace {

// 8-byte little-endian length + header + data, with no validation: for building bad files.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i) & 0xff));
  return out + header + data;
}

void ExpectError(const std::string& bytes, const std::string& fragment) {
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(bytes);
  ASSERT_FALSE(file.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_NE(std::string(file.status().message()).find(fragment), std::string::npos)
      << file.status().message();
}

TEST(Safetensors, RoundTripKeepsTensorsAndMetadata) {
  SafetensorsFile file;
  file.tensors["hidden_states"] = RandomTensor(v1::DTYPE_BF16, {3, 5}, 1);
  file.tensors["weight"] = RandomTensor(v1::DTYPE_FP32, {5}, 2);
  file.tensors["half"] = RandomTensor(v1::DTYPE_FP16, {2, 1, 3}, 3);
  file.tensors["empty"] = RandomTensor(v1::DTYPE_FP32, {0, 4}, 4);
  file.metadata["format"] = "pt";

  absl::StatusOr<std::string> bytes = SerializeSafetensors(file);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | static_cast<uint8_t>((*bytes)[i]);
  EXPECT_EQ(header_size % 8, 0u) << "data should start 8-byte aligned";

  absl::StatusOr<SafetensorsFile> parsed = ParseSafetensors(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->metadata, file.metadata);
  ASSERT_EQ(parsed->tensors.size(), file.tensors.size());
  for (const auto& [name, tensor] : file.tensors) {
    const v1::Tensor& got = parsed->tensors.at(name);
    EXPECT_EQ(got.dtype(), tensor.dtype()) << name;
    EXPECT_EQ(std::vector<int64_t>(got.shape().begin(), got.shape().end()),
              std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()))
        << name;
    EXPECT_EQ(got.data(), tensor.data()) << name;
  }
}

TEST(Safetensors, WriteAndReadAFile) {
  SafetensorsFile file;
  file.tensors["x"] = RandomTensor(v1::DTYPE_FP16, {4, 4}, 9);
  const std::string path = ::testing::TempDir() + "/roundtrip.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, file).ok());
  absl::StatusOr<SafetensorsFile> read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->tensors.at("x").data(), file.tensors.at("x").data());
}

TEST(Safetensors, MissingFileIsNotFound) {
  absl::StatusOr<SafetensorsFile> read = ReadSafetensors(::testing::TempDir() + "/nope.st");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
}

TEST(Safetensors, RejectsFileShorterThanTheLength) {
  ExpectError("", "truncated");
  ExpectError(std::string("\x10\x00\x00", 3), "truncated");
}

TEST(Safetensors, RejectsHeaderLengthBeyondTheFile) {
  std::string bytes = RawFile("{}", "");
  bytes[0] = 100;  // Claims 100 header bytes; 2 follow.
  ExpectError(bytes, "beyond the file");
}

TEST(Safetensors, RejectsHeaderThatIsNotJson) {
  ExpectError(RawFile("{not json", ""), "not JSON");
  ExpectError(RawFile("[1, 2]", ""), "not a JSON object");
}

TEST(Safetensors, RejectsOffsetsOutOfRange) {
  ExpectError(
      RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0')),
      "out of range");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      std::string(12, '\0')),
              "overlap");
}

TEST(Safetensors, RejectsGapsAndUncoveredBytes) {
  ExpectError(
      RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
      "gap");
  ExpectError(
      RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, '\0')),
      "cover 4 of the 8");
}

TEST(Safetensors, RejectsByteSizeThatDisagreesWithShape) {
  ExpectError(
      RawFile(R"({"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", std::string(4, '\0')),
      "prod(shape) x dtype size = 6");
}

TEST(Safetensors, RejectsUnsupportedDtype) {
  ExpectError(
      RawFile(R"({"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')),
      "unsupported dtype 'I64'");
}

TEST(Safetensors, RejectsMalformedEntries) {
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
              "non-negative");
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", ""),
              "data_offsets");
  ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", ""),
              "begin <= end");
  ExpectError(RawFile(R"({"__metadata__":{"k":1}})", ""), "not a string");
}

TEST(Safetensors, SerializeRejectsDataThatDisagreesWithShape) {
  SafetensorsFile file;
  file.tensors["x"] = MakeTensor(v1::DTYPE_FP32, {2}, std::vector<uint8_t>(7));
  EXPECT_FALSE(SerializeSafetensors(file).ok());
}

}  // namespace
}  // namespace kerneleval::client
