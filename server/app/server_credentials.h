// The credentials of the server's --listen port, from the --tls-* flags and the tokens of
// --auth-token-file, and the reading (and re-reading) of those secret files.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "server/app/server_options.h"
#include "server/identity/caller_identity.h"
#include "server/metrics/metrics.h"

namespace kerneleval::server {

// The whole of `path`; NOT_FOUND naming `flag` when it cannot be read.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const char* flag);

// Re-reads --auth-token-file at `path`: when its content differs from `*last` and parses, its
// tokens replace those of `identities`; when it cannot be read or does not parse, the tokens
// read before stay in use (logged). `*last` becomes the content read.
void ReloadTokenFile(const std::string& path, std::string* last, Identities* identities);

// Plaintext or TLS (its files watched by gRPC, refreshed every secrets_poll_seconds), with the
// token check in front of every handler when `identities` has tokens (server/identity/auth.h).
// INVALID_ARGUMENT for an incomplete set of --tls-* flags, NOT_FOUND for a file not readable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenCredentials(
    const ServerOptions& o, std::shared_ptr<const Identities> identities, Metrics* metrics);

}  // namespace kerneleval::server
