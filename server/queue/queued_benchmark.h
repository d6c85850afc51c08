// Benchmark through the verdict queue (--queue-benchmarks): the front's Benchmark call
// enqueues its request as a job any server of the fleet may claim, and follows the job from
// whichever server the client reached, also when another one runs it. The client sees what
// a Benchmark run here would show it: the started event with the run id at once, then, once
// the job is done, each workload's progress and the report, read back from the store the
// servers share. Leaving (or the deadline) cancels the job.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/core/admission.h"
#include "server/core/benchmark_call.h"
#include "server/queue/queue_service.h"
#include "server/store/result_store.h"

namespace kerneleval::server {

// Validates and enqueues `request` for the caller (a refusal is returned, as Benchmark's);
// `callbacks` then run from a thread of the call's own. `service` and `results` must
// outlive the call.
absl::StatusOr<std::shared_ptr<BenchmarkCall>> StartQueuedBenchmark(QueueService* service,
                                                                    store::ResultStore* results,
                                                                    const Caller& caller,
                                                                    v1::BenchmarkRequest request,
                                                                    BenchmarkCallbacks callbacks);

}  // namespace kerneleval::server
