// Running one benchmark request on many servers at once (`kerneleval bench` with several
// --target flags, or one DNS name with several addresses) and merging the reports.
//
// Targets: every HOST:PORT whose HOST is a DNS name is resolved (getaddrinfo, TCP); each
// A / AAAA record becomes a target "IP:PORT" ("[IPv6]:PORT"). A literal IP, a name with a
// single address, a name that does not resolve (gRPC then reports the error for that target)
// and a gRPC URI ("dns:///...", "unix:...") stay as given. A name whose addresses are all
// loopback ("localhost") also stays one target: it names this machine's one server.
//
// The merged output reuses the per-server formats; there is no merged proto message:
// - json: {"targets": [{"target", "status", "report"}...], "summary": {...}} where "report"
//   is the proto JSON of the target's v1::BenchmarkReport (null when its RPC failed) and
//   "status" is "OK" or "CODE: message";
// - table: one section per target (FormatReportTable), a summary table per target x device
//   x implementation, then the per-target errors;
// - csv: FormatReportCsv's header and rows with a leading `target` column.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "client/kerneleval_client.h"
#include "client/report_format.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

// "HOST:PORT" or "[IPv6]:PORT" split; nullopt for anything else (URIs, a missing or
// non-numeric port, an unbracketed IPv6 address).
struct HostPort {
  std::string host;  // Without brackets.
  std::string port;
};
std::optional<HostPort> SplitHostPort(std::string_view target);

// "host:port", or "[host]:port" when `host` contains ':'.
std::string JoinHostPort(std::string_view host, std::string_view port);

// True when `host` is a literal IPv4 or IPv6 address.
bool IsIpLiteral(std::string_view host);

// Every address of `host` (getaddrinfo, SOCK_STREAM, resolver order, duplicates dropped) as
// a target "IP:PORT" / "[IP]:PORT". UNAVAILABLE when the name does not resolve.
absl::StatusOr<std::vector<std::string>> ResolveTargets(const std::string& host,
                                                        const std::string& port);

struct BenchTarget {
  std::string address;      // What the channel connects to.
  std::string server_name;  // The DNS name it came from, when it is an address of one
                            // (used as the TLS server name); empty otherwise.
};

// host, port -> targets, as ResolveTargets (which tests may replace).
using TargetResolver = std::function<absl::StatusOr<std::vector<std::string>>(
    const std::string& host, const std::string& port)>;

// The targets `targets` stand for (see the rules at the top), in order, duplicates dropped.
std::vector<BenchTarget> ExpandTargets(const std::vector<std::string>& targets,
                                       const TargetResolver& resolve = ResolveTargets);

struct TargetResult {
  std::string target;
  grpc::Status status;         // The Benchmark RPC's status (or the channel's, if it failed).
  v1::BenchmarkReport report;  // Meaningful only when status is OK.
  double seconds = 0;          // Wall time of the call.
  double finished_unix_seconds = 0;
};

struct FanOutOptions {
  int concurrency = 4;  // Servers benchmarked at once (at least 1).
  // How long each target may take to accept a connection before its call is made anyway (and
  // fails as unreachable). One refused or failed attempt on a loaded node is retried within
  // this window instead of failing that node's whole run.
  double connect_seconds = 5;
  // How long a target that accepts connections but is not yet ready (its readiness health
  // NOT_SERVING: a server that has just started warms its devices up and refuses work until
  // then) is waited for before its call is made anyway. Within the call's deadline.
  double ready_seconds = 60;
  // Called on a worker thread as each target finishes (calls are serialized).
  std::function<void(const TargetResult&, size_t done, size_t total)> on_done;
};

// Runs `request` on every target, at most `options.concurrency` at once, each on its own
// channel built from `base` (target replaced; the deadline applies to each target's call).
// A failing target does not stop the others. Results come back in `targets` order.
std::vector<TargetResult> RunFanOut(const std::vector<BenchTarget>& targets,
                                    const ClientOptions& base, const v1::BenchmarkRequest& request,
                                    const FanOutOptions& options = {});

// "OK" or "CODE: message".
std::string StatusText(const grpc::Status& status);

// True when a report holds a result that is INCORRECT, a RUNTIME_ERROR or REJECTED.
bool HasFailedResult(const v1::BenchmarkReport& report);

// True when a report did not measure everything it was asked to: not complete (cancelled,
// time cap) or a result SKIPPED.
bool IsIncomplete(const v1::BenchmarkReport& report);

// The merged document in `format` (kJson, kJsonl, kTable or kCsv; kHtml is
// INVALID_ARGUMENT). kJsonl: each target's result lines, "target" first in each.
absl::StatusOr<std::string> FormatFanOut(const std::vector<TargetResult>& results,
                                         ReportFormat format);

// kExitInfrastructure if any target's RPC failed, else kExitIncorrect if any result failed,
// else kExitIncomplete if any report is incomplete, else kExitOk (client/exit_codes.h).
int FanOutExitCode(const std::vector<TargetResult>& results);

}  // namespace kerneleval::client
