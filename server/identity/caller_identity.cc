#include "server/identity/caller_identity.h"

#include <grpc/grpc_security_constants.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kerneleval::server {
namespace {

constexpr absl::string_view kBearer = "Bearer ";

absl::string_view View(const grpc::string_ref& s) { return absl::string_view(s.data(), s.size()); }

// The single value of `key` in the call's metadata; empty when absent or repeated.
absl::string_view OnlyValue(const grpc::ServerContextBase& context, absl::string_view key) {
  const auto& md = context.client_metadata();
  const auto range = md.equal_range(grpc::string_ref(key.data(), key.size()));
  if (range.first == range.second || std::next(range.first) != range.second) return {};
  return View(range.first->second);
}

std::optional<std::string> CertificateOwner(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  for (const grpc::string_ref& subject :
       auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    if (subject.size() > 0) return absl::StrCat("cert:", View(subject));
  }
  for (const grpc::string_ref& id : auth->GetPeerIdentity()) {
    if (id.size() > 0) return absl::StrCat("cert:", View(id));
  }
  return std::nullopt;
}

}  // namespace

bool SecretsEqual(absl::string_view given, absl::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size() && i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

Identities::Identities(std::vector<OwnerToken> tokens)
    : tokens_(std::make_shared<const std::vector<OwnerToken>>(std::move(tokens))) {}

std::shared_ptr<const std::vector<OwnerToken>> Identities::Tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

void Identities::ReplaceTokens(std::vector<OwnerToken> tokens) {
  if (tokens.empty()) return;
  auto replaced = std::make_shared<const std::vector<OwnerToken>>(std::move(tokens));
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::move(replaced);
}

std::optional<std::string> Identities::OwnerOfToken(absl::string_view token) const {
  const std::shared_ptr<const std::vector<OwnerToken>> tokens = Tokens();
  std::size_t matched = tokens->size();
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    // Every token is compared; the match is only remembered (tokens are unique).
    const bool equal = SecretsEqual(token, (*tokens)[i].token);
    matched = equal ? i : matched;
  }
  if (matched == tokens->size()) return std::nullopt;
  return (*tokens)[matched].owner;
}

std::string Identities::CallerOwner(const grpc::ServerContextBase& context) const {
  if (std::optional<std::string> cert = CertificateOwner(context)) return *cert;
  const absl::string_view authorization = OnlyValue(context, "authorization");
  if (has_tokens() && absl::StartsWith(authorization, kBearer)) {
    if (std::optional<std::string> owner = OwnerOfToken(authorization.substr(kBearer.size()))) {
      return *owner;
    }
  }
  return kAnonymousOwner;
}

std::string OwnerOfCall(const Identities* identities, const grpc::ServerContextBase& context) {
  return identities != nullptr ? identities->CallerOwner(context) : kAnonymousOwner;
}

}  // namespace kerneleval::server
