// The --auth-token-file: which bearer tokens the server takes, and whose each one is.
//
//   # comments and blank lines are ignored
//   alice:0c4e...   one line per token, `owner:token`
//   s3cr3t          a bare token (the single-token form of earlier releases) is owner "token"
//
// Owners are 1..64 characters of [A-Za-z0-9._@-]; tokens are 1..4096 printable ASCII
// characters without spaces (what an `authorization: Bearer <token>` value can carry). A
// token or an owner given twice refuses the file: a server must never guess whose a token is.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval::server {

struct OwnerToken {
  std::string owner;
  std::string token;
};

// The tokens of the file's `text`, in file order; INVALID_ARGUMENT naming the line
// ("--auth-token-file line 3: ...") for a malformed line, a duplicate, or a file without any
// token. Messages never hold a token; owners are echoed bounded.
absl::StatusOr<std::vector<OwnerToken>> ParseTokenFile(absl::string_view text);

}  // namespace kerneleval::server
