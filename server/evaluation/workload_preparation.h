// The host side of a Benchmark: each workload's inputs and fp64 reference, generated from its
// seeds, in the order the benchmark engine measures them. On a GPU the next workload is
// prepared on another thread while one is measured; the bytes are the same either way.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"
#include "server/evaluation/benchmark_plan.h"
#include "server/evaluation/evaluation.h"

namespace kerneleval::server {

// One workload's inputs and their fp64 reference, owned.
struct PreparedWorkload {
  std::vector<std::uint8_t> x, r, weight;
  Reference reference;
  HostInputs inputs() const { return {x.data(), r.data(), weight.data()}; }
};

// Hands out the prepared workloads of one plan on one device, in order. Whether the next one
// is prepared ahead follows plan.host_preparation (kAuto: only on a GPU, whose measurements
// run on its own clocks; the CPU backend's run on the very cores preparation would keep busy).
// The destructor abandons a preparation under way and waits for it: no thread outlives this
// object, and a cancelled benchmark waits at most for the step the preparation is in.
class WorkloadPreparation {
 public:
  WorkloadPreparation(const Backend& backend, const BenchmarkPlan& plan);
  ~WorkloadPreparation();
  WorkloadPreparation(const WorkloadPreparation&) = delete;
  WorkloadPreparation& operator=(const WorkloadPreparation&) = delete;

  // Workload `i` of the plan: the preparation started ahead when there is one, else prepared
  // now; then starts preparing workload i + 1 ahead where the plan allows. Adds the seconds the
  // caller waited to `env` (host_wait_seconds) and counts a workload prepared ahead.
  PreparedWorkload Take(std::size_t i, v1::Environment* env);

 private:
  const BenchmarkPlan& plan_;
  const bool ahead_;
  std::atomic<bool> abandon_next_{false};
  std::future<PreparedWorkload> next_;
};

}  // namespace kerneleval::server
