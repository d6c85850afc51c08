// The bearer token the CLI presents, and where it comes from.
//
// A scheduled job holds the same Secret the server reads with --auth-token-file: one
// `owner:token` line per caller (or one bare token), usually with a trailing newline. Sent as
// it is, such a value is refused (`ops:s3cret` is not the token `s3cret`) or aborts gRPC (a
// newline is not a valid header value). So a file (--token-file) or $KERNELEVAL_TOKEN is read
// in the server's layout: blank lines and `#` comments skipped, each line trimmed, and the
// token of the line for --owner NAME, or of the only line when no owner is named. --token is
// taken as given, trimmed.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval::client {

// Where the token comes from, in this order: `flag` (--token), `file` (--token-file PATH),
// `environment` ($KERNELEVAL_TOKEN). Unset sources are nullopt / empty.
struct TokenSources {
  std::optional<std::string> flag;
  std::string file;
  std::string owner;  // --owner: the line of a file or of the variable to take.
  std::optional<std::string> environment;
};

// The token of `text` in the token-file layout: the line for `owner` ("" = the only line).
// INVALID_ARGUMENT naming `source` (the file's path, or "$KERNELEVAL_TOKEN") when there is no
// token, no line for `owner`, several lines and no owner, or a token that cannot be sent as a
// header value (a space or a character outside printable ASCII). Messages name owners, never
// a token.
absl::StatusOr<std::string> SelectToken(absl::string_view text, absl::string_view owner,
                                        absl::string_view source);

// The token of the first source that is set ("" when none is: no authorization metadata);
// the file is read here. INVALID_ARGUMENT naming the file when it cannot be read, and as
// SelectToken; --owner with neither a file nor the variable is refused too.
absl::StatusOr<std::string> ResolveToken(const TokenSources& sources);

}  // namespace kerneleval::client
