// Who may read /metrics. The series name devices, nodes, queue depths and the RPC traffic
// of every owner, so where the gRPC port asks for a bearer token, /metrics asks for one too
// (`Authorization: Bearer <token>`, any token of --auth-token-file, re-read with it), and
// where --metrics-basic-auth-file gives a user and password, those are taken as well. With
// neither, /metrics is open: then it listens on loopback unless told otherwise
// (--metrics-listen).
//
// prometheus-cpp's Exposer knows only basic auth, and one authorization header can carry only
// one scheme; so the check runs before the Exposer's handler sees the request, in civetweb's
// begin_request callback, which knows no more of its server than its options: the gate is
// found through a process-wide table by a name given as the server's authentication_domain.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/exposer.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/identity/caller_identity.h"

namespace kerneleval::server {

class MetricsGate {
 public:
  // `basic_auth` "user:password" or empty; `identities` (may be null) the bearer tokens.
  MetricsGate(std::string basic_auth, std::shared_ptr<const Identities> identities);

  // Whether a request with this Authorization header value (null: none) may read.
  bool Allows(const char* authorization) const;
  // The WWW-Authenticate lines of a refusal: one per scheme taken.
  std::string Challenges() const;

 private:
  bool Open() const;

  std::string user_, password_;  // both empty: no basic auth
  std::shared_ptr<const Identities> identities_;
};

// An Exposer on `listen` whose every request passes `gate` first (401 with the challenges
// when it does not). The caller keeps `gate` for as long as the Exposer lives; a request
// that comes after it is gone is refused. Throws what the Exposer throws when it cannot
// listen.
std::unique_ptr<prometheus::Exposer> GatedExposer(const std::string& listen,
                                                  std::shared_ptr<const MetricsGate> gate);

}  // namespace kerneleval::server
