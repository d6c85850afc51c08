#include "client/token_source.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kerneleval::client {
namespace {

struct Line {
  std::string owner;  // "" for a bare token (the server's owner "token").
  std::string token;
};

// Split at the first colon, as the server's ParseTokenFile does: a token may hold colons, an
// owner cannot.
std::vector<Line> TokenLines(absl::string_view text) {
  std::vector<Line> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      lines.push_back({"", std::string(line)});
    } else {
      lines.push_back({std::string(absl::StripAsciiWhitespace(line.substr(0, colon))),
                       std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)))});
    }
  }
  return lines;
}

// What the server calls the owner of a bare token.
std::string OwnerName(const Line& line) { return line.owner.empty() ? "token" : line.owner; }

absl::Status CheckSendable(absl::string_view token, absl::string_view source) {
  if (token.empty())
    return absl::InvalidArgumentError(absl::StrCat(source, ": the token is empty"));
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat(source,
                       ": the token has a space or a character that is not printable "
                       "ASCII, which an authorization header cannot carry"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SelectToken(absl::string_view text, absl::string_view owner,
                                        absl::string_view source) {
  const std::vector<Line> lines = TokenLines(text);
  if (lines.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no token (lines 'owner:token', or one bare token)"));
  }
  std::vector<std::string> owners;
  for (const Line& line : lines) owners.push_back(OwnerName(line));
  const Line* chosen = nullptr;
  if (!owner.empty()) {
    for (const Line& line : lines) {
      if (OwnerName(line) == owner) chosen = &line;
    }
    if (chosen == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": no line for --owner ", owner, " (owners: ", absl::StrJoin(owners, ", "), ")"));
    }
  } else if (lines.size() == 1) {
    chosen = &lines.front();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", lines.size(),
                                                   " tokens (owners: ", absl::StrJoin(owners, ", "),
                                                   "); name the one to send with --owner NAME"));
  }
  if (absl::Status status = CheckSendable(chosen->token, source); !status.ok()) return status;
  return chosen->token;
}

absl::StatusOr<std::string> ResolveToken(const TokenSources& sources) {
  if (sources.flag.has_value()) {
    std::string token(absl::StripAsciiWhitespace(*sources.flag));
    if (token.empty()) return token;  // --token '': send none, whatever the environment holds.
    if (absl::Status status = CheckSendable(token, "--token"); !status.ok()) return status;
    return token;
  }
  if (!sources.file.empty()) {
    std::ifstream in(sources.file, std::ios::binary);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    if (!in || in.bad()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file ", sources.file, ": cannot be read"));
    }
    return SelectToken(text.str(), sources.owner, absl::StrCat("--token-file ", sources.file));
  }
  if (sources.environment.has_value()) {
    return SelectToken(*sources.environment, sources.owner, "$KERNELEVAL_TOKEN");
  }
  if (!sources.owner.empty()) {
    return absl::InvalidArgumentError(
        "--owner: names a line of --token-file or $KERNELEVAL_TOKEN, and neither is given");
  }
  return std::string();
}

}  // namespace kerneleval::client
