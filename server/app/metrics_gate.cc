#include "server/app/metrics_gate.h"

#include <CivetServer.h>
#include <civetweb.h>

#include <atomic>
#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kerneleval::server {
namespace {

// The gates of the process's metrics servers, by the authentication_domain each was given.
struct GateTable {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<const MetricsGate>> gates;
};

GateTable& Table() {
  static GateTable* table = new GateTable();  // never destroyed: civetweb threads may outlive
  return *table;
}

// civetweb's begin_request: 0 lets the Exposer answer; a status code means answered here.
int CheckRequest(mg_connection* conn) {
  const char* domain = mg_get_option(mg_get_context(conn), "authentication_domain");
  std::shared_ptr<const MetricsGate> gate;
  {
    GateTable& table = Table();
    std::lock_guard<std::mutex> lock(table.mu);
    if (auto it = table.gates.find(domain == nullptr ? "" : domain); it != table.gates.end()) {
      gate = it->second.lock();
    }
  }
  // No gate (a server going down): refuse rather than serve unchecked.
  if (gate != nullptr && gate->Allows(mg_get_header(conn, "Authorization"))) return 0;
  const std::string challenges = gate != nullptr ? gate->Challenges() : "";
  mg_printf(conn,
            "HTTP/1.1 401 Unauthorized\r\n%sContent-Type: text/plain\r\nContent-Length: 13\r\n"
            "Connection: close\r\n\r\nUnauthorized\n",
            challenges.c_str());
  return 401;
}

}  // namespace

MetricsGate::MetricsGate(std::string basic_auth, std::shared_ptr<const Identities> identities)
    : identities_(std::move(identities)) {
  if (const std::size_t colon = basic_auth.find(':'); colon != std::string::npos) {
    user_ = basic_auth.substr(0, colon);
    password_ = basic_auth.substr(colon + 1);
  }
}

bool MetricsGate::Open() const {
  return user_.empty() && (identities_ == nullptr || !identities_->has_tokens());
}

bool MetricsGate::Allows(const char* authorization) const {
  if (Open()) return true;
  if (authorization == nullptr) return false;
  absl::string_view value = absl::StripAsciiWhitespace(authorization);
  // RFC 7235: the scheme is case-insensitive.
  if (value.size() > 7 && absl::EqualsIgnoreCase(value.substr(0, 7), "Bearer ")) {
    const absl::string_view token = absl::StripLeadingAsciiWhitespace(value.substr(7));
    return identities_ != nullptr && identities_->has_tokens() &&
           identities_->OwnerOfToken(token).has_value();
  }
  std::string decoded;
  if (user_.empty() || value.size() <= 6 || !absl::EqualsIgnoreCase(value.substr(0, 6), "Basic ") ||
      !absl::Base64Unescape(absl::StripLeadingAsciiWhitespace(value.substr(6)), &decoded)) {
    return false;
  }
  const std::size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  // Both compared every time: which of the two was wrong takes no time to tell.
  return SecretsEqual(decoded.substr(0, colon), user_) &
         SecretsEqual(decoded.substr(colon + 1), password_);
}

std::string MetricsGate::Challenges() const {
  std::string out;
  if (identities_ != nullptr && identities_->has_tokens()) {
    absl::StrAppend(&out, "WWW-Authenticate: Bearer realm=\"kerneleval\"\r\n");
  }
  if (!user_.empty()) absl::StrAppend(&out, "WWW-Authenticate: Basic realm=\"kerneleval\"\r\n");
  return out;
}

std::unique_ptr<prometheus::Exposer> GatedExposer(const std::string& listen,
                                                  std::shared_ptr<const MetricsGate> gate) {
  static std::atomic<int> next{0};
  const std::string domain = absl::StrCat("kerneleval-metrics-", next++);
  {
    GateTable& table = Table();
    std::lock_guard<std::mutex> lock(table.mu);
    // Entries of servers gone are dropped here, so the table holds the live ones only.
    for (auto it = table.gates.begin(); it != table.gates.end();) {
      it = it->second.expired() ? table.gates.erase(it) : std::next(it);
    }
    table.gates[domain] = gate;
  }
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c{};
    c.begin_request = CheckRequest;
    return c;
  }();
  return std::make_unique<prometheus::Exposer>(
      std::vector<std::string>{"listening_ports", listen, "num_threads", "2",
                               "authentication_domain", domain},
      &callbacks);
}

}  // namespace kerneleval::server
