#include "server/submissions/compile_log.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kerneleval::server::submissions {
namespace {

// Where NVRTC compiles the name expressions (the caller's entries) for lowered-name lookup:
// "__nv_name_map(2): error: identifier "not_there" is undefined".
constexpr absl::string_view kNameExpressionFile = "__nv_name_map";

// FILE of a `FILE(LINE): ` line; nullopt for any other line.
std::optional<absl::string_view> LocatedFile(absl::string_view line) {
  const std::size_t colon = line.find("): ");
  if (colon == absl::string_view::npos) return std::nullopt;
  const std::size_t open = line.rfind('(', colon);
  if (open == absl::string_view::npos || open == 0 || open + 1 == colon) return std::nullopt;
  for (std::size_t i = open + 1; i < colon; ++i) {
    if (!absl::ascii_isdigit(line[i])) return std::nullopt;
  }
  return line.substr(0, open);
}

// `... open source file "NAME"` and nothing after: the reason NVRTC appends (": Permission
// denied" where the jail refused an existing file, nothing where there is none, ": is a
// directory") would tell the caller whether any path exists.
absl::string_view WithoutOpenFailureReason(absl::string_view line) {
  constexpr absl::string_view kOpen = "open source file \"";
  const std::size_t at = line.find(kOpen);
  if (at == absl::string_view::npos) return line;
  const std::size_t close = line.find('"', at + kOpen.size());
  return close == absl::string_view::npos ? line : line.substr(0, close + 1);
}

}  // namespace

std::string SubmissionLogLines(absl::string_view log, absl::string_view source_name) {
  std::string out;
  bool keep = true;
  absl::string_view body = log;
  const bool ends_in_newline = absl::ConsumeSuffix(&body, "\n");
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    const bool column0 = !line.empty() && !absl::ascii_isspace(static_cast<unsigned char>(line[0]));
    if (const auto file = LocatedFile(line); column0 && file.has_value()) {
      keep = *file == source_name || *file == kNameExpressionFile;
    } else if (column0 && (absl::StartsWith(line, "ptxas") ||
                           (absl::ascii_isdigit(static_cast<unsigned char>(line[0])) &&
                            absl::StrContains(line, " detected in the compilation of ")))) {
      keep = true;
    }
    if (keep) absl::StrAppend(&out, WithoutOpenFailureReason(line), "\n");
  }
  if (!out.empty() && !ends_in_newline) out.pop_back();
  return out;
}

}  // namespace kerneleval::server::submissions
