#include "server/identity/token_file.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/bounded_text.h"

namespace kerneleval::server {
namespace {

constexpr std::size_t kMaxOwner = 64;
constexpr std::size_t kMaxToken = 4096;
// The owner of a bare token: what every caller was before tokens named their owners, so
// that submissions registered then stay theirs.
constexpr char kBareTokenOwner[] = "token";

bool OwnerChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '@' ||
         c == '-';
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--auth-token-file line ", line, ": ", what));
}

}  // namespace

absl::StatusOr<std::vector<OwnerToken>> ParseTokenFile(absl::string_view text) {
  std::vector<OwnerToken> tokens;
  std::map<std::string, int> owner_lines, token_lines;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::size_t colon = line.find(':');
    OwnerToken entry;
    if (colon == absl::string_view::npos) {
      entry.owner = kBareTokenOwner;
      entry.token = std::string(line);
    } else {
      entry.owner = std::string(absl::StripAsciiWhitespace(line.substr(0, colon)));
      entry.token = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
    if (entry.owner.empty() || entry.owner.size() > kMaxOwner) {
      return LineError(line_number, absl::StrCat("owner ", Quote(entry.owner), " is not 1 to ",
                                                 kMaxOwner, " characters"));
    }
    for (char c : entry.owner) {
      if (!OwnerChar(c)) {
        return LineError(line_number, absl::StrCat("owner ", Quote(entry.owner),
                                                   " has a character outside [A-Za-z0-9._@-]"));
      }
    }
    if (entry.token.empty() || entry.token.size() > kMaxToken) {
      return LineError(line_number, absl::StrCat("the token of ", Quote(entry.owner),
                                                 " is not 1 to ", kMaxToken, " characters"));
    }
    for (char c : entry.token) {
      if (c <= ' ' || c > '~') {
        return LineError(line_number, absl::StrCat("the token of ", Quote(entry.owner),
                                                   " has a space or a character that is not "
                                                   "printable ASCII"));
      }
    }
    if (auto [it, added] = owner_lines.emplace(entry.owner, line_number); !added) {
      return LineError(line_number,
                       absl::StrCat("owner ", Quote(entry.owner), " was given a token on line ",
                                    it->second, " already"));
    }
    if (auto [it, added] = token_lines.emplace(entry.token, line_number); !added) {
      return LineError(line_number,
                       absl::StrCat("the token of ", Quote(entry.owner), " is the token of line ",
                                    it->second, " too; every owner needs a token of its own"));
    }
    tokens.push_back(std::move(entry));
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        "--auth-token-file: no token in the file (lines 'owner:token', or one bare token)");
  }
  return tokens;
}

}  // namespace kerneleval::server
