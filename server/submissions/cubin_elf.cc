#include "server/submissions/cubin_elf.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kerneleval::server::submissions {
namespace {

// [offset, offset + size) lies inside a file of `file_size` bytes.
bool Inside(std::uint64_t offset, std::uint64_t size, std::uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

}  // namespace

absl::Status MalformedCubin(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "submission.source: the compiled module is not a well-formed ELF64 cubin (", why, ")"));
}

absl::StatusOr<CubinElf> CubinElf::Parse(absl::string_view elf) {
  if (elf.size() < sizeof(Elf64_Ehdr)) return MalformedCubin("shorter than an ELF header");
  const auto eh = ReadAt<Elf64_Ehdr>(elf, 0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return MalformedCubin("no little-endian ELF64 header");
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return MalformedCubin("unexpected section header size");
  }
  const std::uint64_t shnum = eh.e_shnum;
  if (shnum == 0 || !Inside(eh.e_shoff, shnum * sizeof(Elf64_Shdr), elf.size())) {
    return MalformedCubin("section headers outside the file");
  }
  CubinElf out;
  out.elf_ = elf;
  out.sections_.resize(shnum);
  for (std::uint64_t i = 0; i < shnum; ++i) {
    out.sections_[i] = ReadAt<Elf64_Shdr>(elf, eh.e_shoff + i * sizeof(Elf64_Shdr));
  }
  if (eh.e_shstrndx >= shnum) return MalformedCubin("no section name table");
  const Elf64_Shdr& names = out.sections_[eh.e_shstrndx];
  if (!Inside(names.sh_offset, names.sh_size, elf.size())) {
    return MalformedCubin("section name table outside the file");
  }
  out.name_table_ = elf.substr(names.sh_offset, names.sh_size);
  return out;
}

absl::string_view CubinElf::name(std::size_t i) const {
  if (i >= sections_.size() || sections_[i].sh_name >= name_table_.size()) return {};
  const absl::string_view rest = name_table_.substr(sections_[i].sh_name);
  const std::size_t end = rest.find('\0');
  return end == absl::string_view::npos ? absl::string_view() : rest.substr(0, end);
}

absl::StatusOr<absl::string_view> CubinElf::bytes(std::size_t i) const {
  if (i >= sections_.size() || !Inside(sections_[i].sh_offset, sections_[i].sh_size, elf_.size())) {
    return MalformedCubin(absl::StrCat("section ", i, " outside the file"));
  }
  return elf_.substr(sections_[i].sh_offset, sections_[i].sh_size);
}

}  // namespace kerneleval::server::submissions
