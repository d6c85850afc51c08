// Who a call is: the owner whose submissions it may name and whose submissions' results it
// may see. One answer for every service (KernelEval, Submissions, Results), from one place:
//
//   1. under mutual TLS, the verified client certificate: "cert:<subject DN>" (RFC 2253,
//      e.g. "cert:CN=alice,O=lab"), else "cert:<first SAN or CN>" where gRPC gave no subject;
//   2. the bearer token the call carries, when it is one of the --auth-token-file's: its
//      owner (token_file.h);
//   3. otherwise "anonymous".
//
// Why the token is read again here rather than handed over by the token check (auth.h): the
// only place that check can write to is gRPC's auth context, and that belongs to the
// connection, not the call (grpc/grpc#28809): a property set for one call's token is seen by
// every later call on the connection, whatever token that one carries.
//
// Thread-safety: every method may be called from any thread; ReplaceTokens swaps the token
// set (a reloaded --auth-token-file) while calls are checked against the old or the new one.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "absl/strings/string_view.h"
#include "server/identity/token_file.h"

namespace kerneleval::server {

// The owner of a call that carries no identity (no token file, or a front built without one).
inline constexpr char kAnonymousOwner[] = "anonymous";

// Compares without an early exit, so that response times do not reveal how much of a
// guessed secret was right (only whether its length was).
bool SecretsEqual(absl::string_view given, absl::string_view expected);

class Identities {
 public:
  // `tokens` empty: the server takes no token, and no call is a token's owner.
  explicit Identities(std::vector<OwnerToken> tokens = {});

  bool has_tokens() const { return !Tokens()->empty(); }

  // From now on, these tokens and no others (at least one: a server that checks tokens
  // keeps checking them).
  void ReplaceTokens(std::vector<OwnerToken> tokens);

  // The owner of `token`, compared against every configured token (no early exit across the
  // set, so timing tells neither which token matched nor how far a guess got); nullopt for
  // none.
  std::optional<std::string> OwnerOfToken(absl::string_view token) const;

  // The owner of a call this server answers (the list above).
  std::string CallerOwner(const grpc::ServerContextBase& context) const;

 private:
  std::shared_ptr<const std::vector<OwnerToken>> Tokens() const;

  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<OwnerToken>> tokens_;  // never null
};

// The owner every front charges a call's work to and scopes its data by: `identities`'
// CallerOwner, or "anonymous" where the server has none (a front built without them, in
// tests). One function, so that no front can forget the caller and fall back to a default
// owner of its own (OIP once charged every ModelInfer to "anonymous", whatever its token).
std::string OwnerOfCall(const Identities* identities, const grpc::ServerContextBase& context);

}  // namespace kerneleval::server
