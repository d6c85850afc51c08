// The benchmark engine: runs a suite's workloads for several implementations on one device
// under one protocol, checks every result against the fp64 reference, and ranks them.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"
#include "server/evaluation/benchmark_plan.h"

namespace kerneleval::server {

// Receives every timed sample of an implementation (for the kernel-time histograms).
using SampleObserver =
    std::function<void(const std::string& implementation, const std::vector<double>& samples)>;

struct DeviceRun {
  std::vector<v1::WorkloadResult> results;
  v1::Environment environment;
  bool complete = true;
};

// Runs on the device's worker thread: for each workload, generates its inputs and fp64
// reference once, then evaluates every implementation of `plan` on them
// (server/evaluation/evaluation.h). On a GPU the next workload's inputs and reference are prepared
// on another thread while one is measured (plan.host_preparation), the same bytes either way; the
// environment says how long the worker thread waited for each. No thread it starts outlives the
// call. `on_progress` is called once per workload with that workload's results; `should_stop` is
// polled between samples and workloads (cancellation, deadline, time cap). Failures of one
// implementation become results, not errors.
DeviceRun BenchmarkOnDevice(Backend& backend, const BenchmarkPlan& plan,
                            const std::function<void(const v1::BenchmarkProgress&)>& on_progress,
                            const std::function<bool()>& should_stop,
                            const SampleObserver& on_samples = nullptr);

// A submission caught at one workload (REJECTED: a failed call check or verification round,
// traffic or time below its declared bytes) is caught in the whole run: its other results
// on that device become REJECTED too, naming the workload that caught it, so that none of
// its numbers is ranked. (A kernel that cheats only where the cheat pays, e.g. overlapping
// its predecessor where the GPU has room for both, is honest elsewhere only by accident.)
// `submissions` are the implementation names that were submitted; built-ins are the
// service's own code and keep their other results.
void RejectCaughtSubmissions(const std::set<std::string>& submissions,
                             std::vector<v1::WorkloadResult>* results);

// Ranks passing results per (workload, device) by median latency and fills `vs_best`;
// summarizes per (implementation, device): mean of medians, geometric-mean SOL, rank.
// Failed results get rank 0 and make their implementation unranked.
std::vector<v1::ImplementationSummary> RankResults(std::vector<v1::WorkloadResult>* results);

}  // namespace kerneleval::server
