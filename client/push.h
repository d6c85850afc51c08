// Publishing benchmark results to a Prometheus Pushgateway (`kerneleval bench --pushgateway`).
//
// Each target's report becomes one group, job=<job>, instance=<target> (and node=$NODE_NAME
// when set), holding the series the server exports for its latest run, written by the same
// schema code (metrics/report_metrics.h): latency, bandwidth, SOL per peak, correctness,
// suite figures, runtime errors and the last-run timestamp, labelled by suite, workload,
// implementation, device, GPU uuid, model, node and protocol. A push replaces the group
// (HTTP PUT), so the gateway always holds each target's latest run.
//
// The `node` label is $NODE_NAME of the pushing process: the fleet-validation Job
// (deploy/k8s/fleet-validation) runs the server and this client on the node under test and
// sets it from the downward API. A client that benchmarks remote servers should leave it
// unset (an empty node) rather than name its own node.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

namespace v1 = ::kerneleval::v1;

struct PushgatewayAddress {
  std::string host;  // With the scheme: "http://10.0.0.1", "https://[::1]".
  std::string port;  // Default 80 / 443 by scheme.
};

// "http://HOST:PORT" or "https://HOST[:PORT]", optionally with a trailing '/'. Other paths,
// other schemes and user info are INVALID_ARGUMENT.
absl::StatusOr<PushgatewayAddress> ParsePushgatewayUrl(const std::string& url);

// A job name the gateway can take as a URL path segment: [A-Za-z0-9_.:-]+.
bool IsValidPushJob(const std::string& job);

// The report's gauges in the Prometheus text format (what a push sends, before the gateway
// adds job and instance). `unix_seconds` is the last-run timestamp; `node` the node label.
std::string RenderPushMetrics(const v1::BenchmarkReport& report, double unix_seconds,
                              const std::string& node = "");

// $NODE_NAME, or "" when unset.
std::string PushNodeName();

// Pushes the report's gauges to job=`job`, instance=`instance`. UNAVAILABLE naming the HTTP
// status (or the transport error) when the gateway does not answer 2xx.
absl::Status PushReport(const PushgatewayAddress& gateway, const std::string& job,
                        const std::string& instance, const v1::BenchmarkReport& report,
                        double unix_seconds);

}  // namespace kerneleval::client
