#include "server/evaluation/workload_preparation.h"

#include <chrono>
#include <functional>

#include "common/input_generator.h"
#include "common/parallel_ranges.h"

namespace kerneleval::server {
namespace {

// Generates `w`'s inputs from its seeds and computes their reference: the same bytes on any
// thread and with any number of generator threads. `abandon` is checked between the steps, so
// that a preparation nobody will use ends after the step under way (the reference, seconds
// at the largest suite shapes, is the longest); an abandoned result is incomplete.
PreparedWorkload PrepareWorkload(const PlannedWorkload& w, std::size_t threads,
                                 const std::atomic<bool>* abandon) {
  auto abandoned = [abandon] { return abandon != nullptr && abandon->load(); };
  PreparedWorkload p;
  const Problem& problem = w.problem;
  const std::size_t n = problem.TensorElements();
  p.x =
      ParallelRandomTensor(problem.dtype, n, DeriveSeed(w.seed, "hidden_states", w.index), threads);
  if (abandoned()) return p;
  p.r = ParallelRandomTensor(problem.dtype, n, DeriveSeed(w.seed, "residual", w.index), threads);
  if (abandoned()) return p;
  p.weight = RandomTensor(problem.dtype, static_cast<std::size_t>(problem.hidden),
                          DeriveSeed(w.seed, "weight", w.index));
  if (abandoned()) return p;
  p.reference = ComputeReference(problem, p.inputs(), threads);
  return p;
}

// Host bytes a prepared workload holds: its three inputs and one or two fp64 references.
std::uint64_t PreparedBytes(const Problem& p) {
  const std::uint64_t reference_tensors = WritesResidual(p.mode) ? 2 : 1;
  return 2 * std::uint64_t{p.TensorBytes()} + p.WeightBytes() +
         reference_tensors * p.TensorElements() * sizeof(double);
}

// Preparing ahead holds two workloads at once, the fp64 references most of it. Every pair
// of consecutive workloads in suites/ fits (at most 3.4 GB: 4096 then 16384 rows of 8192 in
// llm_widths_bf16_in_place), far below the 64 GiB and more a GPU server's pod asks for; a
// custom suite may name tensors of up to 1 GiB (RequestLimits), 6 GiB prepared each, where a
// second copy could exhaust the server's memory to save seconds: those go serially.
constexpr std::uint64_t kMaxPreparedAheadBytes = std::uint64_t{4} << 30;

// Whether the next workload is prepared on another thread while one is measured. Only where
// the device is not the host: a GPU (in this process or behind a device host) measures on
// its own clocks while host threads generate inputs, but the CPU backend's measurements run
// on the very cores that preparation would keep busy.
bool PrepareAhead(const Backend& backend, HostPreparation mode) {
  switch (mode) {
    case HostPreparation::kSerial:
      return false;
    case HostPreparation::kAhead:
      return true;
    case HostPreparation::kAuto:
      break;
  }
  return backend.IsGpu();
}

// Generator threads: all cores (up to 16) when the worker thread waits for them; ahead of
// time, two cores fewer, one for the worker thread that drives the device and one for a
// device host process, so that launches and timing are not queued behind generation.
std::size_t GeneratorThreads(bool ahead) { return HostWorkThreads(ahead ? 2 : 0); }

}  // namespace

WorkloadPreparation::WorkloadPreparation(const Backend& backend, const BenchmarkPlan& plan)
    : plan_(plan), ahead_(PrepareAhead(backend, plan.host_preparation)) {}

WorkloadPreparation::~WorkloadPreparation() {
  abandon_next_.store(true);
  if (next_.valid()) next_.wait();
}

PreparedWorkload WorkloadPreparation::Take(std::size_t i, v1::Environment* env) {
  const PlannedWorkload& w = plan_.workloads[i];
  const auto wait_start = std::chrono::steady_clock::now();
  PreparedWorkload prepared;
  if (next_.valid()) {
    prepared = next_.get();
    env->set_workloads_prepared_ahead(env->workloads_prepared_ahead() + 1);
  } else {
    prepared = PrepareWorkload(w, GeneratorThreads(false), nullptr);
  }
  env->add_host_wait_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count());
  if (ahead_ && i + 1 < plan_.workloads.size()) {
    const PlannedWorkload& following = plan_.workloads[i + 1];
    if (PreparedBytes(w.problem) + PreparedBytes(following.problem) <= kMaxPreparedAheadBytes) {
      next_ = std::async(std::launch::async, PrepareWorkload, std::cref(following),
                         GeneratorThreads(true), &abandon_next_);
    }
  }
  return prepared;
}

}  // namespace kerneleval::server
