#include "client/push.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include <prometheus/family.h>
#include <prometheus/gateway.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"

namespace kerneleval::client {
namespace {

const char* PeakLabel(v1::PeakSource source) {
  switch (source) {
    case v1::PEAK_SOURCE_DEVICE_ATTRIBUTES:
      return "device_attributes";
    case v1::PEAK_SOURCE_DATASHEET:
      return "datasheet";
    case v1::PEAK_SOURCE_MEASURED_COPY:
      return "measured_copy";
    default:
      return "unknown";
  }
}

// The server's rules (RecordMetrics in the service): every result but skipped ones; latency,
// bandwidth and SOL only when measured; suite figures only for implementations that passed
// everywhere; one last-run timestamp per device.
std::shared_ptr<prometheus::Registry> BuildRegistry(const v1::BenchmarkReport& report,
                                                    double unix_seconds) {
  using prometheus::BuildGauge;
  auto registry = std::make_shared<prometheus::Registry>();
  auto& latency = BuildGauge()
                      .Name("kerneleval_benchmark_latency_seconds")
                      .Help("Latest median latency per call of a suite workload")
                      .Register(*registry);
  auto& bandwidth = BuildGauge()
                        .Name("kerneleval_benchmark_bandwidth_bytes_per_second")
                        .Help("Latest bytes that must move over the median latency")
                        .Register(*registry);
  auto& sol = BuildGauge()
                  .Name("kerneleval_benchmark_sol_ratio")
                  .Help("Latest speed-of-light ratio (0..1) against the labelled peak")
                  .Register(*registry);
  auto& correct = BuildGauge()
                      .Name("kerneleval_benchmark_correct")
                      .Help("1 if the latest run passed the correctness check, else 0")
                      .Register(*registry);
  auto& suite_latency = BuildGauge()
                            .Name("kerneleval_benchmark_suite_mean_latency_seconds")
                            .Help("Latest mean over a suite's workloads of the median latency")
                            .Register(*registry);
  auto& suite_sol = BuildGauge()
                        .Name("kerneleval_benchmark_suite_sol_ratio")
                        .Help("Latest geometric-mean SOL ratio of a suite (device-attribute peak)")
                        .Register(*registry);
  auto& last_run = BuildGauge()
                       .Name("kerneleval_benchmark_last_run_timestamp_seconds")
                       .Help("Unix time at which the latest run of a suite finished")
                       .Register(*registry);

  const std::string suite = !report.suite().empty() ? report.suite() : report.definition().name();
  for (const v1::WorkloadResult& r : report.results()) {
    if (r.status() == v1::RESULT_STATUS_SKIPPED) continue;
    const prometheus::Labels labels{{"suite", suite},
                                    {"workload", r.workload()},
                                    {"implementation", r.implementation()},
                                    {"device", r.device()}};
    correct.Add(labels).Set(r.correctness().passed() ? 1 : 0);
    const bool measured =
        r.status() == v1::RESULT_STATUS_PASSED || r.status() == v1::RESULT_STATUS_INCORRECT;
    if (!measured) continue;
    latency.Add(labels).Set(r.latency().median_seconds());
    bandwidth.Add(labels).Set(r.bytes_per_second());
    for (const v1::SolFigure& f : r.sol()) {
      prometheus::Labels l = labels;
      l["peak"] = PeakLabel(f.source());
      sol.Add(l).Set(f.sol_ratio());
    }
  }
  for (const v1::ImplementationSummary& s : report.summaries()) {
    if (s.failed() != 0 || s.passed() == 0) continue;
    const prometheus::Labels labels{
        {"suite", suite}, {"implementation", s.implementation()}, {"device", s.device()}};
    suite_latency.Add(labels).Set(s.mean_latency_seconds());
    suite_sol.Add(labels).Set(s.geomean_sol_ratio());
  }
  for (const v1::Environment& env : report.environments()) {
    last_run.Add({{"suite", suite}, {"device", env.device().name()}}).Set(unix_seconds);
  }
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

std::string RenderPushMetrics(const v1::BenchmarkReport& report, double unix_seconds) {
  return prometheus::TextSerializer().Serialize(BuildRegistry(report, unix_seconds)->Collect());
}

absl::Status PushReport(const PushgatewayAddress& gateway, const std::string& job,
                        const std::string& instance, const v1::BenchmarkReport& report,
                        double unix_seconds) {
  std::shared_ptr<prometheus::Registry> registry = BuildRegistry(report, unix_seconds);
  // The instance travels base64-encoded: a target may hold ':' '[' ']' or '/'.
  prometheus::Gateway gw{
      gateway.host, gateway.port, job, {{"instance@base64", Base64Url(instance)}}};
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
