#include "server/submissions/cubin_params.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/bounded_text.h"
#include "server/submissions/cubin_elf.h"

namespace kerneleval::server::submissions {
namespace {

constexpr std::uint8_t kFormatSval = 0x04;  // EIFMT_SVAL: a size, then that many bytes
constexpr std::uint8_t kKparamInfo = 0x17;  // EIATTR_KPARAM_INFO
constexpr std::size_t kKparamInfoBytes = 12;
// More parameters than a kernel can take (32,764 bytes of parameters since CUDA 12.1, at
// least 1 byte each): a module that records more is malformed.
constexpr std::size_t kMaxRecordedParams = 32764;

}  // namespace

absl::StatusOr<std::vector<CubinParam>> CubinKernelParams(absl::string_view cubin,
                                                          absl::string_view symbol) {
  absl::StatusOr<CubinElf> elf = CubinElf::Parse(cubin);
  if (!elf.ok()) return elf.status();
  const std::string wanted = absl::StrCat(".nv.info.", symbol);
  absl::string_view info;
  bool found = false;
  for (std::size_t i = 0; i < elf->sections().size() && !found; ++i) {
    if (elf->name(i) != wanted) continue;
    absl::StatusOr<absl::string_view> bytes = elf->bytes(i);
    if (!bytes.ok()) return bytes.status();
    info = *bytes;
    found = true;
  }
  if (!found) {
    return MalformedCubin(absl::StrCat("no parameter records (.nv.info) for kernel ",
                                       Quote(std::string_view(symbol.data(), symbol.size()))));
  }
  std::map<std::uint32_t, CubinParam> by_ordinal;
  for (std::size_t at = 0; at + 4 <= info.size();) {
    const auto format = static_cast<std::uint8_t>(info[at]);
    const auto attribute = static_cast<std::uint8_t>(info[at + 1]);
    const std::uint16_t value = ReadAt<std::uint16_t>(info, at + 2);
    at += 4;
    if (format != kFormatSval) continue;  // the value is in the header
    if (value > info.size() - at) return MalformedCubin("an attribute runs past .nv.info");
    if (attribute == kKparamInfo) {
      if (value != kKparamInfoBytes) return MalformedCubin("a parameter record of another size");
      const std::uint16_t ordinal = ReadAt<std::uint16_t>(info, at + 4);
      CubinParam p;
      p.offset = ReadAt<std::uint16_t>(info, at + 6);
      p.bytes = ReadAt<std::uint32_t>(info, at + 8) >> 18;
      if (by_ordinal.size() >= kMaxRecordedParams) {
        return MalformedCubin("more parameter records than a kernel can take");
      }
      if (!by_ordinal.emplace(ordinal, p).second) {
        return MalformedCubin(absl::StrCat("parameter ", ordinal, " recorded twice"));
      }
    }
    at += value;
  }
  std::vector<CubinParam> params;
  params.reserve(by_ordinal.size());
  for (const auto& [ordinal, p] : by_ordinal) {
    if (ordinal != params.size()) {
      return MalformedCubin(absl::StrCat("no record of parameter ", params.size()));
    }
    params.push_back(p);
  }
  return params;
}

}  // namespace kerneleval::server::submissions
