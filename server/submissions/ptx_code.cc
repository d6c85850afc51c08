#include "server/submissions/ptx_code.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kerneleval::server::submissions {
namespace {

// PTX identifiers are [A-Za-z_$%][A-Za-z0-9_$]*: registers (%r1) read as one token too.
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '$' || c == '%'; }

// The position just past the parenthesised group that opens at `at` (code[at] == '(').
std::size_t SkipParens(absl::string_view code, std::size_t at) {
  int depth = 0;
  for (; at < code.size(); ++at) {
    if (code[at] == '(') ++depth;
    if (code[at] == ')' && --depth == 0) return at + 1;
  }
  return code.size();
}

std::size_t SkipSpace(absl::string_view code, std::size_t at) {
  while (at < code.size() && absl::ascii_isspace(static_cast<unsigned char>(code[at]))) ++at;
  return at;
}

// The position of the `}` that closes the `{` at `at`, or code.size().
std::size_t MatchingBrace(absl::string_view code, std::size_t at) {
  int depth = 0;
  for (; at < code.size(); ++at) {
    if (code[at] == '{') ++depth;
    if (code[at] == '}' && --depth == 0) return at;
  }
  return code.size();
}

// A module's functions, and where each header names its function: those names are no use of
// the function's address.
struct Module {
  std::map<std::string, PtxFunction> functions;
  absl::flat_hash_set<std::size_t> header_names;  // offsets in the code
};

// The .entry or .func header at `at` (code[at] == '.'): its name, parameters and body, added
// to `module` when it has a body. Returns where scanning goes on.
std::size_t ReadFunction(absl::string_view code, std::size_t at, bool entry, Module& module) {
  std::size_t i = SkipSpace(code, at + (entry ? 6 : 5));
  if (!entry && i < code.size() && code[i] == '(') i = SkipSpace(code, SkipParens(code, i));
  const std::size_t name_start = i;
  while (i < code.size() && IsNameChar(code[i])) ++i;
  const std::string name(code.substr(name_start, i - name_start));
  if (name.empty()) return i;
  module.header_names.insert(name_start);
  PtxFunction f;
  f.entry = entry;
  i = SkipSpace(code, i);
  if (i < code.size() && code[i] == '(') {
    const std::size_t close = SkipParens(code, i);
    f.params = code.substr(i + 1, close - i - 2);
    i = close;
  }
  // Performance directives (.maxntid 256, 1, 1 ...) up to the body or the declaration's end.
  while (i < code.size() && code[i] != '{' && code[i] != ';') {
    i = code[i] == '(' ? SkipParens(code, i) : i + 1;
  }
  if (i >= code.size() || code[i] == ';') return i;
  const std::size_t end = MatchingBrace(code, i);
  f.body = code.substr(i, std::min(end + 1, code.size()) - i);
  module.functions.emplace(name, f);
  return end;
}

Module ReadModule(absl::string_view code) {
  Module module;
  for (std::size_t at = 0; at < code.size(); ++at) {
    if (code[at] != '.' || (at > 0 && IsNameChar(code[at - 1]))) continue;
    const bool entry = code.substr(at, 6) == ".entry";
    const bool func = code.substr(at, 5) == ".func";
    const std::size_t after = at + (entry ? 6 : 5);
    if ((!entry && !func) || (after < code.size() && IsNameChar(code[after]))) continue;
    at = ReadFunction(code, at, entry, module);
  }
  return module;
}

// `s` without what may stand before an instruction: labels (`$L__BB0_1:`) and .loc
// directives, which -lineinfo writes before instructions and which end at their line's end,
// not at a `;`.
absl::string_view WithoutLabelsAndLocations(absl::string_view s) {
  for (;;) {
    s = absl::StripLeadingAsciiWhitespace(s);
    if (absl::StartsWith(s, ".loc") && (s.size() == 4 || absl::ascii_isspace(s[4]))) {
      const std::size_t line_end = s.find('\n');
      s = line_end == absl::string_view::npos ? "" : s.substr(line_end + 1);
      continue;
    }
    const std::size_t colon = s.find(':');
    if (colon == absl::string_view::npos || colon == 0) return s;
    const absl::string_view label = s.substr(0, colon);
    if (!std::all_of(label.begin(), label.end(), IsNameChar)) return s;
    s = s.substr(colon + 1);
  }
}

// The instructions of a body: the text between `;`, `{` and `}`, trimmed, each without its
// labels, .loc directives and guard predicate (`@%p1`, `@!%p1`).
std::vector<absl::string_view> Instructions(absl::string_view body) {
  std::vector<absl::string_view> out;
  for (absl::string_view s : absl::StrSplit(body, absl::ByAnyChar(";{}"))) {
    s = absl::StripTrailingAsciiWhitespace(WithoutLabelsAndLocations(s));
    if (absl::StartsWith(s, "@")) {
      const std::size_t space = s.find_first_of(" \t\r\n");
      s = space == absl::string_view::npos ? ""
                                           : absl::StripLeadingAsciiWhitespace(s.substr(space));
    }
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

absl::string_view Opcode(absl::string_view instruction) {
  return instruction.substr(0, instruction.find_first_of(" \t\r\n"));
}

// The target of a `call` instruction: the name or register after the optional return
// parameters, `call.uni (r), f, (a);` -> "f", `call %rd1, (a), proto;` -> "%rd1"; with its
// offset in `instruction`.
std::pair<absl::string_view, std::size_t> CallTarget(absl::string_view instruction) {
  std::size_t i = SkipSpace(instruction, Opcode(instruction).size());
  if (i < instruction.size() && instruction[i] == '(') {
    i = SkipSpace(instruction, SkipParens(instruction, i));
    if (i < instruction.size() && instruction[i] == ',') i = SkipSpace(instruction, i + 1);
  }
  const std::size_t start = i;
  while (i < instruction.size() && IsNameChar(instruction[i])) ++i;
  return {instruction.substr(start, i - start), start};
}

bool IsCall(absl::string_view opcode) {
  return opcode == "call" || absl::StartsWith(opcode, "call.");
}

}  // namespace

std::string PtxWithoutComments(absl::string_view ptx) {
  std::string out(ptx);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '"') {  // a string literal: skipped whole, escapes included
      for (++i; i < out.size() && out[i] != '"' && out[i] != '\n'; ++i) {
        if (out[i] == '\\') ++i;
      }
    } else if (out.compare(i, 2, "//") == 0) {
      for (; i < out.size() && out[i] != '\n'; ++i) out[i] = ' ';
    } else if (out.compare(i, 2, "/*") == 0) {
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

std::map<std::string, PtxFunction> PtxFunctions(absl::string_view code) {
  return ReadModule(code).functions;
}

namespace {

// The element size in bytes of a PTX scalar type (.u32, .b64, .f16, ...); 0 for any other
// word (.param, .ptr, .global, .align).
long long ScalarBytes(absl::string_view type) {
  if (type.size() < 3 || type[0] != '.' || !absl::StrContains("usbf", type[1])) return 0;
  long long bits = 0;
  if (!absl::SimpleAtoi(type.substr(2), &bits)) return 0;
  return bits / 8;
}

// The bytes of one parameter: ".param .align 8 .b8 k_param_0[128]", ".param .u64 k_param_1",
// or with pointer attributes as Triton writes them, ".param .u64 .ptr .global .align 1 k_2".
long long ParamBytes(absl::string_view param) {
  const std::vector<absl::string_view> words =
      absl::StrSplit(param, absl::ByAnyChar(" \t\r\n"), absl::SkipWhitespace());
  if (words.size() < 3) return -1;
  const absl::string_view name = words.back();
  long long count = 1;
  if (const std::size_t bracket = name.find('['); bracket != absl::string_view::npos) {
    if (!absl::SimpleAtoi(name.substr(bracket + 1, name.find(']') - bracket - 1), &count)) {
      count = 0;
    }
  }
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    if (const long long bytes = ScalarBytes(words[i]); bytes > 0) return bytes * count;
  }
  return 0;
}

// The .func names of `module` whose address the code takes: each use of the name that is
// neither its own header nor the target of a direct call (a mov into a register, a table of
// function pointers, a .calltargets list).
std::set<std::string> AddressTaken(absl::string_view code, const Module& module) {
  absl::flat_hash_set<std::size_t> call_targets;
  for (const auto& [name, f] : module.functions) {
    for (absl::string_view instruction : Instructions(f.body)) {
      if (!IsCall(Opcode(instruction))) continue;
      const auto [target, offset] = CallTarget(instruction);
      if (!target.empty()) call_targets.insert(instruction.data() + offset - code.data());
    }
  }
  std::set<std::string> taken;
  for (std::size_t i = 0; i < code.size();) {
    if (!IsNameChar(code[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < code.size() && IsNameChar(code[i])) ++i;
    if (start > 0 && code[start - 1] == '.') continue;  // a directive or a type, not a name
    const auto f = module.functions.find(std::string(code.substr(start, i - start)));
    if (f == module.functions.end() || f->second.entry) continue;
    if (!module.header_names.contains(start) && !call_targets.contains(start)) {
      taken.insert(f->first);
    }
  }
  return taken;
}

}  // namespace

std::optional<std::vector<long long>> PtxEntryParamBytes(absl::string_view ptx,
                                                         absl::string_view lowered_name) {
  const std::string code = PtxWithoutComments(ptx);
  const std::map<std::string, PtxFunction> functions = PtxFunctions(code);
  const auto it = functions.find(std::string(lowered_name));
  if (it == functions.end() || !it->second.entry) return std::nullopt;
  std::vector<long long> params;
  for (absl::string_view p : absl::StrSplit(it->second.params, ',', absl::SkipWhitespace())) {
    if (const long long bytes = ParamBytes(p); bytes >= 0) params.push_back(bytes);
  }
  return params;
}

std::optional<bool> PtxEntryWaitsForGrid(absl::string_view ptx, absl::string_view lowered_name) {
  const std::string code = PtxWithoutComments(ptx);
  const Module module = ReadModule(code);
  const auto entry = module.functions.find(std::string(lowered_name));
  if (entry == module.functions.end() || !entry->second.entry) return std::nullopt;
  std::vector<const PtxFunction*> pending = {&entry->second};
  std::set<std::string> reached;
  bool indirect_followed = false;
  while (!pending.empty()) {
    const PtxFunction* f = pending.back();
    pending.pop_back();
    std::vector<std::string> callees;
    for (absl::string_view instruction : Instructions(f->body)) {
      const absl::string_view opcode = Opcode(instruction);
      if (opcode == "griddepcontrol.wait") return true;
      if (!IsCall(opcode)) continue;
      const absl::string_view target = CallTarget(instruction).first;
      if (absl::StartsWith(target, "%")) {
        // Through a register: any function whose address the module takes, once.
        if (indirect_followed) continue;
        indirect_followed = true;
        for (const std::string& name : AddressTaken(code, module)) callees.push_back(name);
      } else {
        callees.emplace_back(target);
      }
    }
    for (const std::string& name : callees) {
      const auto callee = module.functions.find(name);
      if (callee != module.functions.end() && !callee->second.entry &&
          reached.insert(name).second) {
        pending.push_back(&callee->second);
      }
    }
  }
  return false;
}

}  // namespace kerneleval::server::submissions
