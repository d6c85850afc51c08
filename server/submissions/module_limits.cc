#include "server/submissions/module_limits.h"

#include <elf.h>

#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kerneleval::server::submissions {
namespace {

absl::Status Malformed(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "submission.source: the compiled module is not a well-formed ELF64 cubin (", why, ")"));
}

// [offset, offset + size) lies inside a file of `file_size` bytes.
bool Inside(std::uint64_t offset, std::uint64_t size, std::uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

template <typename T>
T ReadAt(absl::string_view elf, std::uint64_t offset) {
  T value;
  std::memcpy(&value, elf.data() + offset, sizeof(T));  // callers checked the bounds
  return value;
}

std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

}  // namespace

absl::StatusOr<std::uint64_t> CubinStaticDeviceBytes(absl::string_view elf) {
  if (elf.size() < sizeof(Elf64_Ehdr)) return Malformed("shorter than an ELF header");
  const auto eh = ReadAt<Elf64_Ehdr>(elf, 0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return Malformed("no little-endian ELF64 header");
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return Malformed("unexpected section header size");
  const std::uint64_t shnum = eh.e_shnum;
  if (shnum == 0 || !Inside(eh.e_shoff, shnum * sizeof(Elf64_Shdr), elf.size())) {
    return Malformed("section headers outside the file");
  }
  std::vector<Elf64_Shdr> sections(shnum);
  for (std::uint64_t i = 0; i < shnum; ++i) {
    sections[i] = ReadAt<Elf64_Shdr>(elf, eh.e_shoff + i * sizeof(Elf64_Shdr));
  }
  if (eh.e_shstrndx >= shnum) return Malformed("no section name table");
  const Elf64_Shdr& names = sections[eh.e_shstrndx];
  if (!Inside(names.sh_offset, names.sh_size, elf.size())) {
    return Malformed("section name table outside the file");
  }
  const absl::string_view name_table = elf.substr(names.sh_offset, names.sh_size);
  auto section_name = [&](const Elf64_Shdr& s) -> absl::string_view {
    if (s.sh_name >= name_table.size()) return {};
    const absl::string_view rest = name_table.substr(s.sh_name);
    const std::size_t end = rest.find('\0');
    return end == absl::string_view::npos ? absl::string_view() : rest.substr(0, end);
  };

  // Extent per counted section; 0 and not counted for the others.
  std::vector<bool> counted(shnum, false);
  std::vector<std::uint64_t> extent(shnum, 0);
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const absl::string_view name = section_name(sections[i]);
    if (absl::StartsWith(name, ".nv.global") || absl::StartsWith(name, ".nv.constant")) {
      counted[i] = true;
      extent[i] = sections[i].sh_size;
    }
  }
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type != SHT_SYMTAB) continue;
    if (s.sh_entsize != sizeof(Elf64_Sym) || !Inside(s.sh_offset, s.sh_size, elf.size())) {
      return Malformed("symbol table outside the file");
    }
    for (std::uint64_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
      const auto sym = ReadAt<Elf64_Sym>(elf, s.sh_offset + off);
      if (sym.st_shndx >= shnum || !counted[sym.st_shndx]) continue;
      const std::uint64_t end = SaturatingAdd(sym.st_value, sym.st_size);
      if (end > extent[sym.st_shndx]) extent[sym.st_shndx] = end;
    }
  }
  std::uint64_t total = 0;
  for (const std::uint64_t e : extent) total = SaturatingAdd(total, e);
  return total;
}

absl::Status CheckModuleLimits(absl::string_view cubin, const ModuleLimits& limits) {
  if (cubin.size() > limits.max_cubin_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission.source: the compiled module is ", cubin.size(), " bytes; at most ",
                     limits.max_cubin_bytes, " (--max-submission-cubin-bytes)"));
  }
  const absl::StatusOr<std::uint64_t> bytes = CubinStaticDeviceBytes(cubin);
  if (!bytes.ok()) return bytes.status();
  if (*bytes > limits.max_static_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission.source: the module's __device__ / __constant__ variables take ",
                     *bytes, " bytes of device memory at load; at most ", limits.max_static_bytes,
                     " (--max-submission-static-bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace kerneleval::server::submissions
