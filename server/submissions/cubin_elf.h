// A compiled submission's cubin as ELF64 sections, read with every offset and size checked:
// the cubin is hostile bytes (whatever came out of a compile of the caller's text). Shared by
// the module limits (module_limits.h) and the parameter records (cubin_params.h).
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval::server::submissions {

// The T at byte `offset` of `bytes`, whatever its alignment; the caller checked that
// [offset, offset + sizeof(T)) lies inside `bytes`.
template <typename T>
T ReadAt(absl::string_view bytes, std::uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// INVALID_ARGUMENT naming submission.source: the compiled module is no well-formed cubin.
absl::Status MalformedCubin(absl::string_view why);

class CubinElf {
 public:
  // The section headers of a little-endian ELF64 file and its section name table; the
  // MalformedCubin error where any lies outside `elf`. `elf` must outlive the result.
  static absl::StatusOr<CubinElf> Parse(absl::string_view elf);

  absl::string_view file() const { return elf_; }
  const std::vector<Elf64_Shdr>& sections() const { return sections_; }
  // Section `i`'s name; empty where its name lies outside the name table.
  absl::string_view name(std::size_t i) const;
  // Section `i`'s bytes in the file; MalformedCubin where they lie outside it.
  absl::StatusOr<absl::string_view> bytes(std::size_t i) const;

 private:
  absl::string_view elf_;
  std::vector<Elf64_Shdr> sections_;
  absl::string_view name_table_;
};

}  // namespace kerneleval::server::submissions
