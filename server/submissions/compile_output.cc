#include "server/submissions/compile_output.h"

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kerneleval::server::submissions {
namespace {

// The number before `unit` in a fragment such as " 8 bytes spill stores".
std::optional<long long> NumberBefore(absl::string_view fragment, absl::string_view unit) {
  fragment = absl::StripAsciiWhitespace(fragment);
  if (!absl::EndsWith(fragment, unit)) return std::nullopt;
  fragment = absl::StripAsciiWhitespace(fragment.substr(0, fragment.size() - unit.size()));
  long long value = 0;
  if (!absl::SimpleAtoi(fragment, &value)) return std::nullopt;
  return value;
}

}  // namespace

std::map<std::string, v1::KernelResources> ParsePtxasInfo(absl::string_view log) {
  std::map<std::string, v1::KernelResources> out;
  v1::KernelResources* current = nullptr;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "ptxas")) continue;
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (absl::ConsumePrefix(&rest, "info")) {
      rest = absl::StripLeadingAsciiWhitespace(rest);
      absl::ConsumePrefix(&rest, ":");
      rest = absl::StripLeadingAsciiWhitespace(rest);
      if (absl::ConsumePrefix(&rest, "Compiling entry function '")) {
        const std::string name(rest.substr(0, rest.find('\'')));
        current = &out[name];
        current->set_lowered_name(name);
      } else if (absl::ConsumePrefix(&rest, "Used ") && current != nullptr) {
        for (absl::string_view part : absl::StrSplit(rest, ',')) {
          part = absl::StripAsciiWhitespace(part);
          if (auto v = NumberBefore(part, "registers")) {
            current->set_registers(static_cast<int>(*v));
          } else if (absl::ConsumePrefix(&part, "used ")) {
            if (auto b = NumberBefore(part, "barriers"))
              current->set_barriers(static_cast<int>(*b));
          } else if (auto s = NumberBefore(part, "bytes smem")) {
            current->set_static_smem_bytes(*s);
          }
        }
      }
    } else if (absl::ConsumePrefix(&rest, ".") && current != nullptr) {
      for (absl::string_view part : absl::StrSplit(rest, ',')) {
        if (auto v = NumberBefore(part, "bytes stack frame")) current->set_stack_frame_bytes(*v);
        if (auto v = NumberBefore(part, "bytes spill stores")) current->set_spill_store_bytes(*v);
        if (auto v = NumberBefore(part, "bytes spill loads")) current->set_spill_load_bytes(*v);
      }
    }
  }
  return out;
}

}  // namespace kerneleval::server::submissions
