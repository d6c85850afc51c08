#include "client/push.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include <cstdlib>

#include <prometheus/gateway.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"
#include "metrics/report_metrics.h"

namespace kerneleval::client {
namespace {

std::shared_ptr<prometheus::Registry> BuildRegistry(const v1::BenchmarkReport& report,
                                                    double unix_seconds, const std::string& node) {
  auto registry = std::make_shared<prometheus::Registry>();
  metrics::ReportMetrics(*registry).Record(report, node, unix_seconds);
  return registry;
}

// URL-safe base64 with padding, as the Pushgateway takes for `label@base64/value`.
std::string Base64Url(const std::string& in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

}  // namespace

absl::StatusOr<PushgatewayAddress> ParsePushgatewayUrl(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pushgateway '", url, "': ", why, " (expected http://HOST:PORT)"));
  };
  std::string scheme, rest;
  for (const char* s : {"http", "https"}) {
    const std::string prefix = absl::StrCat(s, "://");
    if (url.compare(0, prefix.size(), prefix) == 0) {
      scheme = s;
      rest = url.substr(prefix.size());
    }
  }
  if (scheme.empty()) return bad("the scheme must be http or https");
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("/?#@") != std::string::npos) {
    return bad("no path, query or user info is allowed");
  }
  PushgatewayAddress address;
  std::string host = rest, port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) return bad("unterminated '['");
    host = rest.substr(0, close + 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("junk after ']'");
      port = rest.substr(close + 2);
    }
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string::npos) return bad("IPv6 addresses go in brackets");
  }
  if (host.empty() || host == "[]") return bad("no host");
  if (port.empty()) port = scheme == "https" ? "443" : "80";
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
      std::stoi(port) == 0 || std::stoi(port) > 65535) {
    return bad("bad port");
  }
  address.host = absl::StrCat(scheme, "://", host);
  address.port = port;
  return address;
}

bool IsValidPushJob(const std::string& job) {
  return !job.empty() && std::all_of(job.begin(), job.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
           c == '-';
  });
}

std::string PushNodeName() {
  const char* node = std::getenv("NODE_NAME");
  return node != nullptr ? node : "";
}

std::string RenderPushMetrics(const v1::BenchmarkReport& report, double unix_seconds,
                              const std::string& node) {
  return prometheus::TextSerializer().Serialize(
      BuildRegistry(report, unix_seconds, node)->Collect());
}

absl::Status PushReport(const PushgatewayAddress& gateway, const std::string& job,
                        const std::string& instance, const v1::BenchmarkReport& report,
                        double unix_seconds) {
  const std::string node = PushNodeName();
  std::shared_ptr<prometheus::Registry> registry = BuildRegistry(report, unix_seconds, node);
  // The instance travels base64-encoded: a target may hold ':' '[' ']' or '/'. The node is
  // part of the group, so that the fleet-validation Jobs, which all benchmark 127.0.0.1,
  // keep one group per node instead of replacing each other's.
  prometheus::Labels grouping{{"instance@base64", Base64Url(instance)}};
  if (!node.empty()) grouping["node@base64"] = Base64Url(node);
  prometheus::Gateway gw{gateway.host, gateway.port, job, grouping};
  gw.RegisterCollectable(registry);
  const int code = gw.Push();
  if (code >= 200 && code < 300) return absl::OkStatus();
  if (code < 0) {
    return absl::UnavailableError(absl::StrCat("push to ", gateway.host, ":", gateway.port,
                                               " failed (curl error ", -code, ")"));
  }
  return absl::UnavailableError(
      absl::StrCat("push to ", gateway.host, ":", gateway.port, " answered HTTP ", code));
}

}  // namespace kerneleval::client
