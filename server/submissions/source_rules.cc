#include "server/submissions/source_rules.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "kerneleval/submission_abi.h"

namespace kerneleval::server::submissions {
namespace {

constexpr std::size_t kMaxDefines = 32;
constexpr std::size_t kMaxDefineBytes = 128;
constexpr std::size_t kMaxEntryBytes = 256;

// The source with line splices removed and comments replaced by a space, keeping a map from
// each output character to its 1-based input line, so that errors quote the user's line.
struct Cleaned {
  std::string text;
  std::vector<int> line_of;
};

Cleaned StripCommentsAndSplices(absl::string_view s) {
  Cleaned c;
  c.text.reserve(s.size());
  c.line_of.reserve(s.size());
  int line = 1;
  enum { kCode, kLineComment, kBlockComment, kString, kChar } state = kCode;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '\\') {  // a splice joins the lines; compilers allow blanks and CR before the LF
      std::size_t j = i + 1;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) ++j;
      if (j < s.size() && s[j] == '\n') {
        i = j;
        ++line;
        continue;
      }
    }
    auto emit = [&](char out) {
      c.text.push_back(out);
      c.line_of.push_back(line);
    };
    switch (state) {
      case kCode:
        if (ch == '/' && i + 1 < s.size() && s[i + 1] == '/') {
          state = kLineComment;
          ++i;
          emit(' ');
        } else if (ch == '/' && i + 1 < s.size() && s[i + 1] == '*') {
          state = kBlockComment;
          ++i;
          emit(' ');
        } else {
          if (ch == '"') state = kString;
          if (ch == '\'') state = kChar;
          emit(ch);
        }
        break;
      case kLineComment:
        if (ch == '\n') {
          state = kCode;
          emit('\n');
        }
        break;
      case kBlockComment:
        if (ch == '*' && i + 1 < s.size() && s[i + 1] == '/') {
          state = kCode;
          ++i;
        } else if (ch == '\n') {
          emit('\n');  // keeps directives after a multi-line comment on their own line
        }
        break;
      case kString:
      case kChar:
        emit(ch);
        if (ch == '\\' && i + 1 < s.size() && s[i + 1] != '\n') {
          emit(s[++i]);
        } else if ((state == kString && ch == '"') || (state == kChar && ch == '\'') ||
                   ch == '\n') {
          state = kCode;
        }
        break;
    }
    if (ch == '\n') ++line;
  }
  return c;
}

bool IsAllowedInclude(absl::string_view name) {
  if (name.empty() || name.size() > 128 || absl::StrContains(name, "..")) return false;
  for (const char ch : name) {
    if (!absl::ascii_isalnum(ch) && ch != '_' && ch != '.' && ch != '/') return false;
  }
  if (name == kAbiInclude) return true;
  for (const std::string& allowed : AllowedIncludes()) {
    if (absl::EndsWith(allowed, "/*")) {
      if (absl::StartsWith(name, allowed.substr(0, allowed.size() - 1))) return true;
    } else if (name == allowed) {
      return true;
    }
  }
  return false;
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  for (const char ch : s) {
    if (!absl::ascii_isalnum(ch) && ch != '_') return false;
  }
  return true;
}

}  // namespace

int OldAbiVersion(long long bytes) {
  switch (bytes) {
    case 128:
      return 1;
    case 136:
      return 2;
    default:
      return 0;
  }
}

std::string OldAbiRefusal(absl::string_view field, absl::string_view entry, int version) {
  return absl::StrCat(field, ": ", Quote(entry), " takes kerneleval_params of ABI version ",
                      version, "; this server speaks version ", KERNELEVAL_ABI_VERSION, " (",
                      KERNELEVAL_PARAMS_BYTES,
                      " bytes, fields reordered): build it against the current "
                      "<kerneleval/submission_abi.h> and register it again");
}

std::string Quote(absl::string_view value, std::size_t max) {
  std::string shown;
  for (const char ch : value.substr(0, max)) {
    shown.push_back(absl::ascii_isprint(static_cast<unsigned char>(ch)) ? ch : '?');
  }
  if (value.size() <= max) return absl::StrCat("'", shown, "'");
  return absl::StrCat("'", shown, "...' (", value.size(), " bytes)");
}

const std::vector<std::string>& AllowedIncludes() {
  // The CUDA headers a device-side kernel uses, all of which NVRTC compiles from the
  // toolkit's include directory; nothing that reaches the host's C library.
  static const std::vector<std::string> kAllowed = {
      "cuda_fp16.h",     "cuda_bf16.h",      "cuda_fp8.h",
      "cuda_pipeline.h", "cuda_awbarrier.h", "cooperative_groups.h",
      "mma.h",           "cuda/barrier",     "cuda/pipeline",
      "cuda/ptx",        "cuda/atomic",      "cuda/annotated_ptr",
      "cuda/cmath",      "cuda/std/*",       "cooperative_groups/*"};
  return kAllowed;
}

absl::Status CheckIncludes(absl::string_view source, absl::string_view field) {
  const Cleaned c = StripCommentsAndSplices(source);
  std::size_t pos = 0;
  while (pos < c.text.size()) {
    std::size_t end = c.text.find('\n', pos);
    if (end == std::string::npos) end = c.text.size();
    absl::string_view line =
        absl::StripLeadingAsciiWhitespace(absl::string_view(c.text).substr(pos, end - pos));
    const int line_no = c.line_of.empty() ? 1 : c.line_of[pos < c.line_of.size() ? pos : 0];
    pos = end + 1;
    // "%:" is the digraph of "#" (trigraphs are gone in C++17, the standard NVRTC is given).
    if (!absl::ConsumePrefix(&line, "#") && !absl::ConsumePrefix(&line, "%:")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "include") && !absl::ConsumePrefix(&line, "import")) {
      if (absl::StartsWith(line, "include_next") || absl::StartsWith(line, "embed")) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": line ", line_no, ": this directive is not allowed"));
      }
      continue;
    }
    line = absl::StripAsciiWhitespace(line);
    const char open = line.empty() ? '\0' : line[0];
    const char close = open == '<' ? '>' : open == '"' ? '"' : '\0';
    const std::size_t closing = close == '\0' ? absl::string_view::npos : line.find(close, 1);
    if (closing == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": line ", line_no, ": #include ", Quote(line),
                       " is not allowed: only #include <...> or \"...\" of a listed header"));
    }
    const absl::string_view name = line.substr(1, closing - 1);
    if (!IsAllowedInclude(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": line ", line_no, ": #include ", Quote(name), " is not allowed; allowed: <",
          kAbiInclude, "> and ", absl::StrJoin(AllowedIncludes(), ", ")));
    }
  }
  return absl::OkStatus();
}

bool IsSupportedArch(absl::string_view arch) { return arch == "sm_90a" || arch == "sm_100a"; }

std::string ArchForComputeCapability(absl::string_view cc) {
  if (cc == "9.0") return "sm_90a";
  if (cc == "10.0") return "sm_100a";
  return "";
}

absl::Status CheckSubmissionName(absl::string_view name, absl::string_view field) {
  bool ok = !name.empty() && name.size() <= 64 && absl::ascii_isalpha(name[0]);
  for (const char ch : name) {
    ok = ok && (absl::ascii_isalnum(ch) || ch == '_' || ch == '.' || ch == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": ", Quote(name), " must be 1 to 64 letters, digits, _ . - starting with a letter"));
}

absl::Status CheckEntry(absl::string_view entry, absl::string_view field) {
  // A C++ name expression: qualified names and template arguments of literals and names.
  bool ok = !entry.empty() && entry.size() <= kMaxEntryBytes &&
            (absl::ascii_isalpha(entry[0]) || entry[0] == '_' || entry[0] == ':');
  for (const char ch : entry) {
    ok = ok &&
         (absl::ascii_isalnum(ch) || absl::string_view("_:<>, ").find(ch) != std::string::npos);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": ", Quote(entry),
      " is not a kernel name: a C++ name (ns::kernel, kernel<256>) of at most 256 characters"));
}

absl::Status CheckDefines(const google::protobuf::RepeatedPtrField<v1::Define>& defines,
                          absl::string_view field) {
  if (defines.size() > static_cast<int>(kMaxDefines)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", defines.size(), " defines; at most ", kMaxDefines));
  }
  for (int i = 0; i < defines.size(); ++i) {
    const v1::Define& d = defines[i];
    if (!IsIdentifier(d.name()) || d.name().size() > kMaxDefineBytes ||
        absl::StartsWith(d.name(), "__") || absl::StartsWith(d.name(), "KERNELEVAL")) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "].name: ", Quote(d.name()),
                       " must be an identifier not starting with __ or KERNELEVAL"));
    }
    bool ok = d.value().size() <= kMaxDefineBytes;
    for (const char ch : d.value()) {
      ok = ok && (absl::ascii_isalnum(ch) ||
                  absl::string_view("_.+-*/() ").find(ch) != absl::string_view::npos);
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "].value: ", Quote(d.value()),
                       " may hold letters, digits, spaces and _ . + - * / ( ) only (at most 128)"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> NvrtcOptions(absl::string_view arch, bool fast_math,
                                      const google::protobuf::RepeatedPtrField<v1::Define>& defines,
                                      absl::string_view cuda_include_dir) {
  // --no-source-include: the source's directory (NVRTC's working directory) is no include
  // path; the service gives NVRTC its headers from memory (compile_headers.h).
  std::vector<std::string> options = {
      absl::StrCat("-arch=", arch), "-lineinfo",  "--ptxas-options=-v",
      "--ptxas-options=-O3",        "-std=c++17", "--no-source-include"};
  if (fast_math) options.push_back("--use_fast_math");
  for (const v1::Define& d : defines) {
    options.push_back(absl::StrCat("-D", d.name(), "=", d.value().empty() ? "1" : d.value()));
  }
  if (!cuda_include_dir.empty()) {
    // The toolkit's headers; CUDA 13 keeps libcu++ (cuda/std/..., cuda/barrier) in cccl/.
    options.push_back(absl::StrCat("-I", cuda_include_dir));
    options.push_back(absl::StrCat("-I", cuda_include_dir, "/cccl"));
  }
  return options;
}

}  // namespace kerneleval::server::submissions
