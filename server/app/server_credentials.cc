#include "server/app/server_credentials.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/identity/auth.h"
#include "server/identity/token_file.h"

namespace kerneleval::server {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ReloadTokenFile(const std::string& path, std::string* last, Identities* identities) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, "--auth-token-file");
  if (!text.ok()) {
    LogError(absl::StrCat(text.status().message(), "; the tokens read before stay in use"));
    return;
  }
  if (*text == *last) return;
  absl::StatusOr<std::vector<OwnerToken>> parsed = ParseTokenFile(*text);
  if (parsed.ok()) {
    identities->ReplaceTokens(std::move(*parsed));
    LogInfo("--auth-token-file changed: its new tokens are in use");
  } else {
    LogError(absl::StrCat("--auth-token-file changed but does not parse (",
                          parsed.status().message(), "); the tokens read before stay in use"));
  }
  *last = *std::move(text);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenCredentials(
    const ServerOptions& o, std::shared_ptr<const Identities> identities, Metrics* metrics) {
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    if (identities->has_tokens()) {
      return TokenCheckingCredentials(nullptr, std::move(identities), metrics);
    }
    return grpc::InsecureServerCredentials();
  }
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  // Read once here so that a missing file stops the start with the flag named; from then on
  // gRPC's file watcher reads them (auth.h, TlsFiles).
  for (const auto& [path, flag] :
       {std::pair{o.tls_key_file, "--tls-key"}, std::pair{o.tls_cert_file, "--tls-cert"},
        std::pair{o.tls_client_ca_file, "--tls-client-ca"}}) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::string> read = ReadSecretFile(path, flag); !read.ok()) {
      return read.status();
    }
  }
  TlsFiles tls;
  tls.cert = o.tls_cert_file;
  tls.key = o.tls_key_file;
  tls.client_ca = o.tls_client_ca_file;
  tls.refresh_seconds = static_cast<unsigned>(std::max(1.0, o.secrets_poll_seconds));
  if (identities->has_tokens()) {
    return TokenCheckingCredentials(&tls, std::move(identities), metrics);
  }
  return WatchedTlsCredentials(tls);
}

}  // namespace kerneleval::server
