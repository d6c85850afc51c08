#include "server/submissions/compile_output.h"

#include <cstdlib>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
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

// The element size in bytes of a PTX scalar type (.u32, .b64, .f16, ...).
long long ScalarBytes(absl::string_view type) {
  if (type.size() < 3) return 0;
  long long bits = 0;
  if (!absl::SimpleAtoi(type.substr(2), &bits)) return 0;
  return bits / 8;
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

std::optional<std::vector<long long>> PtxEntryParamBytes(absl::string_view ptx,
                                                         absl::string_view lowered_name) {
  std::size_t at = 0;
  while ((at = ptx.find(".entry ", at)) != absl::string_view::npos) {
    at += 7;
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(ptx.substr(at));
    if (!absl::ConsumePrefix(&rest, lowered_name)) continue;
    rest = absl::StripLeadingAsciiWhitespace(rest);
    std::vector<long long> params;
    if (!absl::ConsumePrefix(&rest, "(")) return params;  // no parameter list
    const std::size_t close = rest.find(')');
    for (absl::string_view p : absl::StrSplit(rest.substr(0, close), ',', absl::SkipWhitespace())) {
      // ".param .align 8 .b8 k_param_0[128]" or ".param .u64 k_param_1"
      std::vector<absl::string_view> words = absl::StrSplit(p, ' ', absl::SkipWhitespace());
      std::vector<absl::string_view> clean;
      for (absl::string_view w : words) {
        w = absl::StripAsciiWhitespace(w);
        if (!w.empty()) clean.push_back(w);
      }
      if (clean.size() < 3) continue;
      const absl::string_view name = clean.back();
      const absl::string_view type = clean[clean.size() - 2];
      long long count = 1;
      if (const std::size_t bracket = name.find('['); bracket != absl::string_view::npos) {
        if (!absl::SimpleAtoi(name.substr(bracket + 1, name.find(']') - bracket - 1), &count)) {
          count = 0;
        }
      }
      params.push_back(ScalarBytes(type) * count);
    }
    return params;
  }
  return std::nullopt;
}

namespace {

// `ptx` with its comments (// to the end of the line, /* ... */) replaced by spaces.
std::string WithoutComments(absl::string_view ptx) {
  std::string out(ptx);
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '/' && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out[i] == '/' && out[i + 1] == '*') {
      const std::size_t end = out.find("*/", i + 2);
      const std::size_t stop = end == std::string::npos ? out.size() : end + 2;
      for (; i < stop; ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
      --i;
    }
  }
  return out;
}

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '$'; }

// The position just past the parenthesised group that opens at `at` (code[at] == '(').
std::size_t SkipParens(absl::string_view code, std::size_t at) {
  int depth = 0;
  for (; at < code.size(); ++at) {
    if (code[at] == '(') ++depth;
    if (code[at] == ')' && --depth == 0) return at + 1;
  }
  return code.size();
}

struct PtxFunctions {
  absl::flat_hash_map<std::string, absl::string_view> entries;  // name -> body
  absl::flat_hash_map<std::string, absl::string_view> funcs;
};

// Every .entry and .func with a body (declarations without one are skipped).
PtxFunctions FunctionBodies(absl::string_view code) {
  PtxFunctions out;
  for (std::size_t at = 0; at < code.size(); ++at) {
    const bool entry = code.substr(at, 6) == ".entry";
    const bool func = code.substr(at, 5) == ".func";
    if (!entry && !func) continue;
    std::size_t i = at + (entry ? 6 : 5);
    if (i < code.size() && IsNameChar(code[i])) continue;  // .function_name, .entryx
    while (i < code.size() && absl::ascii_isspace(code[i])) ++i;
    if (i < code.size() && code[i] == '(') i = SkipParens(code, i);  // a .func's return values
    while (i < code.size() && absl::ascii_isspace(code[i])) ++i;
    const std::size_t name_start = i;
    while (i < code.size() && IsNameChar(code[i])) ++i;
    const std::string name(code.substr(name_start, i - name_start));
    // Parameters and performance directives, up to the body or the declaration's end.
    while (i < code.size() && code[i] != '{' && code[i] != ';') {
      i = code[i] == '(' ? SkipParens(code, i) : i + 1;
    }
    if (i >= code.size() || code[i] == ';' || name.empty()) {
      at = i;
      continue;
    }
    const std::size_t body_start = i;
    int depth = 0;
    for (; i < code.size(); ++i) {
      if (code[i] == '{') ++depth;
      if (code[i] == '}' && --depth == 0) break;
    }
    (entry ? out.entries : out.funcs)[name] = code.substr(body_start, i - body_start);
    at = i;
  }
  return out;
}

}  // namespace

std::optional<bool> PtxEntryWaitsForGrid(absl::string_view ptx, absl::string_view lowered_name) {
  const std::string code = WithoutComments(ptx);
  const PtxFunctions functions = FunctionBodies(code);
  const auto entry = functions.entries.find(std::string(lowered_name));
  if (entry == functions.entries.end()) return std::nullopt;
  // Bodies reachable from the entry through any name they mention.
  std::vector<absl::string_view> pending = {entry->second};
  std::set<std::string> reached;
  while (!pending.empty()) {
    const absl::string_view body = pending.back();
    pending.pop_back();
    if (absl::StrContains(body, "griddepcontrol.wait")) return true;
    for (std::size_t i = 0; i < body.size();) {
      if (!IsNameChar(body[i])) {
        ++i;
        continue;
      }
      const std::size_t start = i;
      while (i < body.size() && IsNameChar(body[i])) ++i;
      const std::string name(body.substr(start, i - start));
      const auto func = functions.funcs.find(name);
      if (func != functions.funcs.end() && reached.insert(name).second) {
        pending.push_back(func->second);
      }
    }
  }
  return false;
}

}  // namespace kerneleval::server::submissions
