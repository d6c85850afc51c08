// A Benchmark from any front: admitted, validated, one job queued per chosen device, each run
// by BenchmarkOnDevice (server/evaluation/benchmark_engine.h) on the device's worker, then one
// report: results ranked, stored, written to the metrics. The KernelEval RPC only streams what this
// produces; StartRun (server/core/run_call.h) is its twin for Run.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/core/admission.h"
#include "server/core/service_state.h"

namespace kerneleval::server {

struct BenchmarkCallbacks {
  // Once, after validation and before any job is queued, from the thread that calls
  // StartBenchmark: the run id the report will be stored under, so that a client that
  // cancels during the first workload still knows it. May be empty.
  std::function<void(const v1::BenchmarkStarted&)> on_started;
  // After each workload on a device, from that device's worker thread. May be empty.
  std::function<void(const v1::BenchmarkProgress&)> on_progress;
  // Exactly once, after every queued job has ended: the report, or why there is none
  // (DEADLINE_EXCEEDED or CANCELLED once it ran; a device that refused the job).
  std::function<void(absl::StatusOr<v1::BenchmarkReport>)> done;
  // A queued job's (server/queue/queue_runner.h): the run id reserved when it was enqueued,
  // and how its report is stored (under the job's lease, on the worker's thread) in place of
  // the store's writer queue. Empty: a fresh run id, and the writer queue.
  std::string run_id;
  std::function<void(const v1::BenchmarkReport&)> record;
};

// A benchmark in flight. Device jobs hold it; so may its front, to cancel it.
class BenchmarkCall {
 public:
  virtual ~BenchmarkCall() = default;
  // Stops every device job at its next check (between samples); `done` then reports
  // CANCELLED.
  virtual void Cancel() = 0;
};

// Validates `request` and queues its jobs. A refusal before any job is queued is returned,
// and `callbacks.done` is never called; otherwise `done` is called exactly once.
absl::StatusOr<std::shared_ptr<BenchmarkCall>> StartBenchmark(ServiceState& state, Caller caller,
                                                              v1::BenchmarkRequest request,
                                                              BenchmarkCallbacks callbacks);

}  // namespace kerneleval::server
