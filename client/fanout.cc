#include "client/fanout.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/exit_codes.h"
#include "client/text_table.h"
#include "common/csv_cell.h"

namespace kerneleval::client {
namespace {

using Json = nlohmann::ordered_json;

// True when `target` ("IP:PORT") is a loopback address.
bool IsLoopbackTarget(const std::string& target) {
  const std::optional<HostPort> hp = SplitHostPort(target);
  if (!hp) return false;
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, hp->host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, hp->host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6) != 0;
  return false;
}

// The model of `device` from the report's environments; empty when not reported.
const v1::Environment* FindEnvironment(const v1::BenchmarkReport& report,
                                       const std::string& device) {
  for (const v1::Environment& env : report.environments()) {
    if (env.device().name() == device) return &env;
  }
  return nullptr;
}

struct SummaryRow {
  std::string target;
  std::string hostname;
  std::string device;
  std::string model;
  const v1::ImplementationSummary* summary;
};

std::vector<SummaryRow> SummaryRows(const std::vector<TargetResult>& results) {
  std::vector<SummaryRow> rows;
  for (const TargetResult& r : results) {
    if (!r.status.ok()) continue;
    for (const v1::ImplementationSummary& s : r.report.summaries()) {
      const v1::Environment* env = FindEnvironment(r.report, s.device());
      rows.push_back(
          {r.target, env ? env->hostname() : "", s.device(), env ? env->device().model() : "", &s});
    }
  }
  return rows;
}

size_t CountFailed(const std::vector<TargetResult>& results) {
  return static_cast<size_t>(std::count_if(results.begin(), results.end(),
                                           [](const TargetResult& r) { return !r.status.ok(); }));
}

absl::StatusOr<std::string> FormatJson(const std::vector<TargetResult>& results) {
  Json doc = Json::object();
  Json targets = Json::array();
  std::string suite;
  for (const TargetResult& r : results) {
    Json entry = Json::object();
    entry["target"] = r.target;
    entry["status"] = StatusText(r.status);
    if (r.status.ok()) {
      absl::StatusOr<std::string> text = MessageToJson(r.report);
      if (!text.ok()) return text.status();
      entry["report"] = Json::parse(*text);
      if (suite.empty()) suite = r.report.suite();
    } else {
      entry["report"] = nullptr;
    }
    targets.push_back(std::move(entry));
  }
  doc["targets"] = std::move(targets);

  Json summary = Json::object();
  summary["suite"] = suite;
  summary["targets"] = results.size();
  summary["succeeded"] = results.size() - CountFailed(results);
  summary["failed"] = CountFailed(results);
  size_t incorrect = 0;
  for (const TargetResult& r : results) incorrect += r.status.ok() && HasFailedResult(r.report);
  summary["targets_with_failed_results"] = incorrect;
  Json rows = Json::array();
  for (const SummaryRow& row : SummaryRows(results)) {
    Json j = Json::object();
    j["target"] = row.target;
    j["hostname"] = row.hostname;
    j["device"] = row.device;
    j["model"] = row.model;
    j["implementation"] = row.summary->implementation();
    j["rank"] = row.summary->rank();
    j["mean_latency_seconds"] = row.summary->mean_latency_seconds();
    j["geomean_sol_ratio"] = row.summary->geomean_sol_ratio();
    j["passed"] = row.summary->passed();
    j["failed"] = row.summary->failed();
    rows.push_back(std::move(j));
  }
  summary["implementations"] = std::move(rows);
  doc["summary"] = std::move(summary);
  return doc.dump(2) + "\n";
}

std::string FormatTable(const std::vector<TargetResult>& results) {
  std::string out;
  for (const TargetResult& r : results) {
    absl::StrAppend(&out, "=== ", r.target, ": ", StatusText(r.status), " ===\n");
    if (r.status.ok()) {
      absl::StrAppend(&out, FormatReportTable(r.report));
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "=== summary: ", results.size() - CountFailed(results), " of ",
                  results.size(), " targets succeeded ===\n");
  TextTable table({"target", "device", "model", "implementation", "suite mean latency",
                   "geomean SOL %", "passed/failed"});
  for (const SummaryRow& row : SummaryRows(results)) {
    table.AddRow({row.target, row.device, row.model.empty() ? "-" : row.model,
                  row.summary->implementation(), FormatSeconds(row.summary->mean_latency_seconds()),
                  row.summary->geomean_sol_ratio() > 0
                      ? Fixed(100 * row.summary->geomean_sol_ratio(), 1)
                      : "-",
                  absl::StrCat(row.summary->passed(), "/", row.summary->failed())});
  }
  absl::StrAppend(&out, table.Render());
  if (CountFailed(results) > 0) {
    absl::StrAppend(&out, "\nerrors:\n");
    for (const TargetResult& r : results) {
      if (!r.status.ok()) absl::StrAppend(&out, "  ", r.target, ": ", StatusText(r.status), "\n");
    }
  }
  return out;
}

std::string FormatCsv(const std::vector<TargetResult>& results) {
  std::string out;
  bool header_written = false;
  for (const TargetResult& r : results) {
    if (!r.status.ok()) continue;
    std::istringstream lines(FormatReportCsv(r.report));
    std::string line;
    bool header = true;
    while (std::getline(lines, line)) {
      if (header) {
        header = false;
        if (header_written) continue;
        header_written = true;
        absl::StrAppend(&out, "target,", line, "\n");
        continue;
      }
      absl::StrAppend(&out, CsvCell(r.target), ",", line, "\n");
    }
  }
  if (!header_written) {
    // No target answered: still the header, taken from an empty report.
    std::istringstream lines(FormatReportCsv(v1::BenchmarkReport()));
    std::string line;
    if (std::getline(lines, line)) absl::StrAppend(&out, "target,", line, "\n");
  }
  return out;
}

// Waits until the server of `client` says it is ready (grpc.health.v1 "readiness" SERVING), at
// most `seconds`. Gives up at once where the server answers no health check (none served, or
// not reachable): the call that follows then says why.
void WaitUntilReady(const KernelEvalClient& client, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool serving = false;
    if (!client.HealthCheck("readiness", &serving).ok() || serving) return;
    if (std::chrono::steady_clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

std::optional<HostPort> SplitHostPort(std::string_view target) {
  HostPort hp;
  std::string_view rest;
  if (!target.empty() && target.front() == '[') {
    const size_t close = target.find(']');
    if (close == std::string_view::npos || close + 1 >= target.size() || target[close + 1] != ':') {
      return std::nullopt;
    }
    hp.host = std::string(target.substr(1, close - 1));
    rest = target.substr(close + 2);
  } else {
    const size_t colon = target.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    hp.host = std::string(target.substr(0, colon));
    rest = target.substr(colon + 1);
    if (hp.host.find_first_of(":/") != std::string::npos) return std::nullopt;
  }
  if (hp.host.empty() || rest.empty() || rest.size() > 5 ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  hp.port = std::string(rest);
  return hp;
}

std::string JoinHostPort(std::string_view host, std::string_view port) {
  const std::string h(host), p(port);
  if (h.find(':') != std::string::npos) return "[" + h + "]:" + p;
  return h + ":" + p;
}

bool IsIpLiteral(std::string_view host) {
  const std::string h(host);
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, h.c_str(), &v4) == 1 || inet_pton(AF_INET6, h.c_str(), &v6) == 1;
}

absl::StatusOr<std::vector<std::string>> ResolveTargets(const std::string& host,
                                                        const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::vector<std::string> targets;
  std::set<std::string> seen;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = nullptr;
    if (a->ai_family == AF_INET) {
      raw = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    } else if (a->ai_family == AF_INET6) {
      raw = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    } else {
      continue;
    }
    if (inet_ntop(a->ai_family, raw, text, sizeof(text)) == nullptr) continue;
    std::string target = JoinHostPort(text, port);
    if (seen.insert(target).second) targets.push_back(std::move(target));
  }
  freeaddrinfo(list);
  if (targets.empty()) {
    return absl::UnavailableError(absl::StrCat("'", host, "' has no IPv4 or IPv6 address"));
  }
  return targets;
}

std::vector<BenchTarget> ExpandTargets(const std::vector<std::string>& targets,
                                       const TargetResolver& resolve) {
  std::vector<BenchTarget> out;
  std::set<std::string> seen;
  auto add = [&](std::string address, std::string server_name) {
    if (seen.insert(address).second) out.push_back({std::move(address), std::move(server_name)});
  };
  for (const std::string& target : targets) {
    const std::optional<HostPort> hp = SplitHostPort(target);
    if (!hp || IsIpLiteral(hp->host)) {
      add(target, "");
      continue;
    }
    absl::StatusOr<std::vector<std::string>> resolved = resolve(hp->host, hp->port);
    if (!resolved.ok() || resolved->size() <= 1 ||
        std::all_of(resolved->begin(), resolved->end(), IsLoopbackTarget)) {
      add(target, "");
      continue;
    }
    for (std::string& address : *resolved) add(std::move(address), hp->host);
  }
  return out;
}

std::vector<TargetResult> RunFanOut(const std::vector<BenchTarget>& targets,
                                    const ClientOptions& base, const v1::BenchmarkRequest& request,
                                    const FanOutOptions& options) {
  std::vector<TargetResult> results(targets.size());
  std::atomic<size_t> next{0};
  std::mutex done_mu;
  size_t done = 0;
  auto work = [&] {
    for (size_t i = next++; i < targets.size(); i = next++) {
      TargetResult& result = results[i];
      result.target = targets[i].address;
      const auto t0 = std::chrono::steady_clock::now();
      ClientOptions client_options = base;
      client_options.target = targets[i].address;
      if (client_options.tls && client_options.tls_server_name.empty()) {
        client_options.tls_server_name = targets[i].server_name;
      }
      std::unique_ptr<KernelEvalClient> client;
      result.status = KernelEvalClient::Create(client_options, &client);
      if (result.status.ok()) {
        if (client->WaitForConnection(std::min(options.connect_seconds, base.deadline_seconds))) {
          WaitUntilReady(*client, std::min(options.ready_seconds, base.deadline_seconds));
        }
        result.status = client->Benchmark(request, [&](const v1::BenchmarkEvent& event) {
          if (event.has_report()) result.report = event.report();
        });
      }
      result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      result.finished_unix_seconds =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      std::lock_guard<std::mutex> lock(done_mu);
      ++done;
      if (options.on_done) options.on_done(result, done, targets.size());
    }
  };
  const size_t workers =
      std::min(targets.size(), static_cast<size_t>(std::max(1, options.concurrency)));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers; ++i) threads.emplace_back(work);
  if (workers > 0) work();
  for (std::thread& t : threads) t.join();
  return results;
}

std::string StatusText(const grpc::Status& status) {
  if (status.ok()) return "OK";
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                      ": ", status.error_message());
}

bool HasFailedResult(const v1::BenchmarkReport& report) {
  for (const v1::WorkloadResult& result : report.results()) {
    if (result.status() == v1::RESULT_STATUS_INCORRECT ||
        result.status() == v1::RESULT_STATUS_RUNTIME_ERROR ||
        result.status() == v1::RESULT_STATUS_REJECTED) {
      return true;
    }
  }
  return false;
}

bool IsIncomplete(const v1::BenchmarkReport& report) {
  if (!report.complete()) return true;
  for (const v1::WorkloadResult& result : report.results()) {
    if (result.status() == v1::RESULT_STATUS_SKIPPED) return true;
  }
  return false;
}

absl::StatusOr<std::string> FormatFanOut(const std::vector<TargetResult>& results,
                                         ReportFormat format) {
  switch (format) {
    case ReportFormat::kJson:
      return FormatJson(results);
    case ReportFormat::kJsonl: {
      // Failed targets have no lines: their errors are on stderr and in the exit code.
      std::string lines;
      for (const TargetResult& r : results) {
        if (!r.status.ok()) continue;
        absl::StatusOr<std::string> text = FormatReportJsonl(r.report, r.target);
        if (!text.ok()) return text.status();
        lines += *text;
      }
      return lines;
    }
    case ReportFormat::kCsv:
      return FormatCsv(results);
    case ReportFormat::kTable:
      return FormatTable(results);
    case ReportFormat::kHtml:
      break;
  }
  return absl::InvalidArgumentError("--format html: one target only");
}

int FanOutExitCode(const std::vector<TargetResult>& results) {
  if (CountFailed(results) > 0) return kExitInfrastructure;
  for (const TargetResult& r : results) {
    if (HasFailedResult(r.report)) return kExitIncorrect;
  }
  for (const TargetResult& r : results) {
    if (IsIncomplete(r.report)) return kExitIncomplete;
  }
  return kExitOk;
}

}  // namespace kerneleval::client
