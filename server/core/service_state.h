// What every front of the service (the KernelEval RPCs, and later ones) shares: the devices,
// the suites loaded at start, the metrics, the limits, and the server's readiness.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/core/request_validation.h"
#include "server/device/device_set.h"
#include "server/identity/caller_identity.h"
#include "server/metrics/metrics.h"
#include "server/store/result_store.h"

namespace kerneleval::server {

class BenchmarkCall;        // server/core/benchmark_call.h
struct BenchmarkCallbacks;  // server/core/benchmark_call.h
struct Caller;              // server/core/admission.h

struct ServiceState {
  DeviceSet* devices = nullptr;
  std::vector<v1::SuiteDefinition> suites;  // loaded at start
  Metrics* metrics = nullptr;
  // Every finished Benchmark report is queued here (null: results are not kept).
  store::ResultStore* results = nullptr;
  RequestLimits limits;
  HostPreparation host_preparation = HostPreparation::kAuto;  // ServerOptions'
  std::atomic<bool> ready{false};
  // A device has warmed up: work is admitted from then on, each device taking it only
  // while it serves (DeviceSet::FindHealthy), so that one that never warms up keeps no one
  // out.
  std::atomic<bool> warmed{false};
  std::atomic<bool> draining{false};
  std::atomic<std::uint64_t> queued_bytes{0};  // held by admitted Runs (limits.max_queued_bytes)
  // Registered submissions for Run and Benchmark, by owner and id or name: NOT_FOUND for
  // none such, FAILED_PRECONDITION while submissions are off. Empty: the server takes none.
  std::function<absl::StatusOr<SubmittedKernel>(const std::string& owner,
                                                const std::string& id_or_name)>
      find_submission;
  // Whose submissions a call may name, and whose results a Benchmark stores
  // (caller_identity.h). Null: every caller is "anonymous".
  const Identities* identities = nullptr;
  // Set with --queue-benchmarks: Benchmark calls go through the verdict queue, to be run by
  // whichever server claims them and followed from here (server/queue/queued_benchmark.h),
  // instead of to this server's devices. Empty: they run here.
  std::function<absl::StatusOr<std::shared_ptr<BenchmarkCall>>(
      const Caller& caller, v1::BenchmarkRequest request, BenchmarkCallbacks callbacks)>
      benchmark_through_queue;
};

}  // namespace kerneleval::server
