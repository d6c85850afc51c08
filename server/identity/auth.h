// Bearer-token authentication in the transport. gRPC's server auth filter checks the token
// on each call's initial metadata, before a handler is picked or the request message is
// read, so a call without the token costs the server no message parsing and reaches no
// handler; every service is covered alike (KernelEval and reflection) except
// grpc.health.v1.Health, which stays open for probes. Whose a token is, is decided per call
// by Identities::CallerOwner (caller_identity.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/status.h>

#include "absl/strings/string_view.h"
#include "server/identity/caller_identity.h"
#include "server/metrics/metrics.h"

namespace kerneleval::server {

// The decision for a call to `path` ("/package.Service/Method") that carries these
// `authorization` values: OK for health, or for exactly one value "Bearer <token>" with one
// of `identities`' tokens; UNAUTHENTICATED without a value; PERMISSION_DENIED otherwise. The
// message never holds a token, given or expected, and the comparison runs over every token
// and takes the same time wherever the tokens differ.
grpc::Status CheckBearerToken(absl::string_view path,
                              const std::vector<absl::string_view>& authorization,
                              const Identities& identities);

// The TLS files of a server (--tls-cert, --tls-key, --tls-client-ca: empty for no client
// certificates). gRPC's file watcher reads them every `refresh_seconds` and gives new
// connections what they hold then (a renewed certificate, a rotated CA) without a restart; a
// key and certificate that do not match (a rotation half done) are not taken.
struct TlsFiles {
  std::string cert, key, client_ca;
  unsigned refresh_seconds = 5;
};

// Plaintext (`tls` null) or TLS server credentials whose ports apply CheckBearerToken to
// every call with `identities`' tokens (at least one). The token stays on the call's
// metadata for Identities::CallerOwner alone, which tells its owner per call. Rejected calls
// are counted in `metrics` (may be null; must outlive the server). gRPC's own plaintext
// credentials cannot carry such a check: their SetAuthMetadataProcessor aborts.
std::shared_ptr<grpc::ServerCredentials> TokenCheckingCredentials(
    const TlsFiles* tls, std::shared_ptr<const Identities> identities, Metrics* metrics);

// TLS server credentials on `tls`, without tokens: gRPC's TlsServerCredentials with its
// FileWatcherCertificateProvider.
std::shared_ptr<grpc::ServerCredentials> WatchedTlsCredentials(const TlsFiles& tls);

}  // namespace kerneleval::server
