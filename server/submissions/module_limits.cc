#include "server/submissions/module_limits.h"

#include <elf.h>

#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/submissions/cubin_elf.h"

namespace kerneleval::server::submissions {
namespace {

std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

}  // namespace

absl::StatusOr<std::uint64_t> CubinStaticDeviceBytes(absl::string_view elf) {
  absl::StatusOr<CubinElf> parsed = CubinElf::Parse(elf);
  if (!parsed.ok()) return parsed.status();
  const std::vector<Elf64_Shdr>& sections = parsed->sections();
  const std::uint64_t shnum = sections.size();

  // Extent per counted section; 0 and not counted for the others.
  std::vector<bool> counted(shnum, false);
  std::vector<std::uint64_t> extent(shnum, 0);
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const absl::string_view name = parsed->name(i);
    if (absl::StartsWith(name, ".nv.global") || absl::StartsWith(name, ".nv.constant")) {
      counted[i] = true;
      extent[i] = sections[i].sh_size;
    }
  }
  for (std::uint64_t i = 0; i < shnum; ++i) {
    if (sections[i].sh_type != SHT_SYMTAB) continue;
    const absl::StatusOr<absl::string_view> table = parsed->bytes(i);
    if (sections[i].sh_entsize != sizeof(Elf64_Sym) || !table.ok()) {
      return MalformedCubin("symbol table outside the file");
    }
    for (std::size_t off = 0; off + sizeof(Elf64_Sym) <= table->size(); off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, table->data() + off, sizeof(sym));
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
