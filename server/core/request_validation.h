// Validation of every request field before any work is queued. Errors are
// INVALID_ARGUMENT naming the field (e.g. "residual.shape: [3, 7] does not match
// hidden_states.shape [3, 8]"), or RESOURCE_EXHAUSTED for a request over a server limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/conversions.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"
#include "server/device/measure_options.h"  // ToMeasureOptions, for the paths that validate
#include "server/evaluation/benchmark_plan.h"

namespace kerneleval::server {

struct RequestLimits {
  std::uint64_t max_tensor_bytes = std::uint64_t{1} << 30;
  std::int64_t max_batch = std::int64_t{1} << 24;
  std::int64_t max_hidden = std::int64_t{1} << 20;
  std::uint32_t max_repetitions = 10000;
  std::uint32_t max_warmup = 1000;
  std::uint32_t max_graph_calls = 1000;
  double max_benchmark_seconds = 3600;
  // Bytes of Run requests and their outputs held for queued and running work, over every
  // device; a Run that would go over is RESOURCE_EXHAUSTED (0 = no bound). The server's
  // default is half the memory limit of its cgroup (a pod's limit), where there is one.
  std::uint64_t max_queued_bytes = 0;
};

// Half the memory limit of this process's cgroup (v2 memory.max, else v1
// memory.limit_in_bytes), or 0 where there is no limit.
std::uint64_t DefaultMaxQueuedBytes();

// The problem a Run request describes, its tensors checked against each other.
absl::StatusOr<Problem> ValidateRunRequest(const v1::RunRequest& request,
                                           const RequestLimits& limits);

// Resolves a Benchmark request into the plan the benchmark engine runs
// (server/evaluation/benchmark_plan.h).
absl::StatusOr<BenchmarkPlan> ValidateBenchmarkRequest(
    const v1::BenchmarkRequest& request, const std::vector<v1::SuiteDefinition>& suites,
    const RequestLimits& limits);

// The protocol a Run request asks for: its warm-up and repetitions (at least 1), hot caches,
// and its timer, where TIMER_UNSPECIFIED on a GPU means CUDA events (CUPTI's two forced
// activity flushes per timed call cost ~0.5 ms on an H200, 300x a small kernel).
v1::Protocol RunProtocol(const v1::RunRequest& request, bool gpu);

// A benchmark protocol with defaults filled in (warm-up 10, repetitions 50, cold, 20 calls
// per graph, seed 200), or an error naming the field under "protocol.".
absl::StatusOr<v1::Protocol> ResolveProtocol(const v1::Protocol& requested,
                                             const RequestLimits& limits);

}  // namespace kerneleval::server
