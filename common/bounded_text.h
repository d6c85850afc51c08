// Client-supplied text in messages, bounded. An error that echoes a 10 KB name or a shape of
// 100,000 dimensions would exceed gRPC's 8 KiB metadata limit, and the caller would see
// RESOURCE_EXHAUSTED instead of the error; every echoed value goes through here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "google/protobuf/repeated_field.h"

namespace kerneleval {

// Longest client text quoted in full.
inline constexpr std::size_t kMaxEchoedChars = 64;

// 'name' for short text; for longer text a prefix and the length:
// 'aaaaaaaa...' (10240 bytes). Bytes outside printable ASCII appear as \xNN.
std::string Quote(std::string_view text, std::size_t max_chars = kMaxEchoedChars);

// "[3, 8]" for short shapes; "[1, 1, 1, 1, 1, 1, 1, 1, ...] (100000 dims)" for long ones.
std::string ShapeText(const google::protobuf::RepeatedField<std::int64_t>& shape);

}  // namespace kerneleval
