#include "server/submissions/compile_headers.h"

#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

namespace fs = std::filesystem;

// Larger than any toolkit header (cuda_fp16.hpp is ~150 KB); a bound on what is read.
constexpr std::uintmax_t kMaxHeaderBytes = 4 << 20;

struct Found {
  std::string name;  // relative to its directory, normalized
  fs::path path;
  fs::path root;  // the directory it was found in
};

// `relative` under `root`, when it stays inside it and is a regular file.
std::optional<Found> Lookup(const fs::path& root, const fs::path& relative) {
  const fs::path normal = relative.lexically_normal();
  if (normal.empty() || normal.is_absolute() || *normal.begin() == "..") return std::nullopt;
  std::error_code ec;
  const fs::path path = root / normal;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  return Found{normal.generic_string(), path, root};
}

struct Include {
  std::size_t name_begin = 0, name_end = 0;  // of the name, inside the line
  bool quoted = false;
};

// `#include <name>` or `#include "name"` (the toolkit's own headers: no comments or splices
// inside a directive).
std::optional<Include> ParseInclude(absl::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&rest, "#")) return std::nullopt;
  rest = absl::StripLeadingAsciiWhitespace(rest);
  if (!absl::ConsumePrefix(&rest, "include")) return std::nullopt;
  rest = absl::StripLeadingAsciiWhitespace(rest);
  if (rest.empty() || (rest[0] != '<' && rest[0] != '"')) return std::nullopt;
  const char close = rest[0] == '<' ? '>' : '"';
  const std::size_t end = rest.find(close, 1);
  if (end == absl::string_view::npos) return std::nullopt;
  Include inc;
  inc.quoted = rest[0] == '"';
  inc.name_begin = static_cast<std::size_t>(rest.data() - line.data()) + 1;
  inc.name_end = inc.name_begin + end - 1;
  return inc;
}

}  // namespace

absl::StatusOr<HeaderSet> LoadAllowedHeaders(const std::vector<std::string>& include_dirs) {
  std::vector<fs::path> roots(include_dirs.begin(), include_dirs.end());
  auto find = [&](const fs::path& relative) -> std::optional<Found> {
    for (const fs::path& root : roots) {
      if (auto f = Lookup(root, relative)) return f;
    }
    return std::nullopt;
  };

  std::deque<Found> work;
  for (const std::string& allowed : AllowedIncludes()) {
    if (absl::EndsWith(allowed, "/*")) {
      const std::string dir = allowed.substr(0, allowed.size() - 2);
      for (const fs::path& root : roots) {
        std::error_code ec;
        for (fs::recursive_directory_iterator it(root / dir, ec), end; !ec && it != end;
             it.increment(ec)) {
          if (it->is_regular_file(ec)) {
            work.push_back(
                {it->path().lexically_relative(root).generic_string(), it->path(), root});
          }
        }
      }
      continue;
    }
    std::optional<Found> f = find(allowed);
    if (!f.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda include dir: allowed header ", allowed, " not found"));
    }
    work.push_back(*std::move(f));
  }

  HeaderSet set;
  std::unordered_set<std::string> seen;
  while (!work.empty()) {
    const Found header = std::move(work.front());
    work.pop_front();
    if (!seen.insert(header.name).second) continue;  // the first directory wins, as with -I
    std::error_code ec;
    if (fs::file_size(header.path, ec) > kMaxHeaderBytes || ec) continue;
    std::ifstream in(header.path, std::ios::binary);
    std::stringstream raw;
    raw << in.rdbuf();
    const std::string text = raw.str();
    const fs::path dir = fs::path(header.name).parent_path();
    std::string out;
    out.reserve(text.size());
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      std::optional<Include> inc = ParseInclude(line);
      std::optional<Found> target;
      if (inc.has_value()) {
        const std::string name(line.substr(inc->name_begin, inc->name_end - inc->name_begin));
        // As a compiler searches: a quoted name beside the including file first.
        if (inc->quoted) target = Lookup(header.root, dir / name);
        if (!target.has_value()) target = find(name);
      }
      if (target.has_value()) {
        absl::StrAppend(&out, line.substr(0, inc->name_begin), target->name,
                        line.substr(inc->name_end), "\n");
        if (seen.count(target->name) == 0) work.push_back(*target);
      } else {
        absl::StrAppend(&out, line, "\n");
      }
    }
    set.names.push_back(header.name);
    set.texts.push_back(std::move(out));
  }
  return set;
}

}  // namespace kerneleval::server::submissions
