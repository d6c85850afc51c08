#include "server/evaluation/benchmark_engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_name.h"
#include "common/input_generator.h"
#include "common/parallel_ranges.h"
#include "server/device/measure_options.h"
#include "server/evaluation/evaluation.h"
#include "server/evaluation/measurement_checks.h"
#include "server/evaluation/server_version.h"
#include "server/evaluation/sol.h"
#include "server/evaluation/statistics.h"

namespace kerneleval::server {
namespace {

// Reasons that mean the clocks were held back, not merely idle or set by the admin.
constexpr std::uint64_t kBenignThrottleBits = 0x1 | 0x2 | 0x100;

v1::Clocks ReadClocks(Backend& backend, bool* available) { return backend.ReadClocks(available); }

bool Throttled(const v1::Clocks& c) { return (c.throttle_reasons() & ~kBenignThrottleBits) != 0; }

// One workload's inputs and their fp64 reference, owned.
struct PreparedWorkload {
  std::vector<std::uint8_t> x, r, weight;
  Reference reference;
  HostInputs inputs() const { return {x.data(), r.data(), weight.data()}; }
};

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

DeviceRun BenchmarkOnDevice(Backend& backend, const BenchmarkPlan& plan,
                            const std::function<void(const v1::BenchmarkProgress&)>& on_progress,
                            const std::function<bool()>& should_stop,
                            const SampleObserver& on_samples) {
  DeviceRun run;
  v1::Environment& env = run.environment;
  const v1::Device device = backend.Describe();
  *env.mutable_device() = device;
  env.set_driver_version(backend.DriverVersion());
  env.set_cuda_runtime_version(backend.RuntimeVersion());
  env.set_server_version(ServerVersion());
  env.set_git_revision(GitRevision());
  env.set_timestamp(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  env.set_hostname(HostName());
  env.set_cupti_status(backend.TimerStatus());
  bool clocks_available = false;
  *env.mutable_clocks_before() = ReadClocks(backend, &clocks_available);
  env.set_clocks_available(clocks_available);

  const std::vector<PeakBandwidth> peaks = PeaksFor(device, plan.protocol.measure_copy_bandwidth());
  MeasureOptions options = ToMeasureOptions(plan.protocol);
  options.should_stop = should_stop;
  const auto workload_count = static_cast<std::uint32_t>(plan.workloads.size());

  const bool ahead = PrepareAhead(backend, plan.host_preparation);
  // The next workload's preparation, when one is under way. Every path out of this function
  // abandons it and waits (a std::async future also waits when destroyed): no thread outlives
  // the call, and a cancelled benchmark waits at most for the step it is in.
  std::atomic<bool> abandon_next{false};
  std::future<PreparedWorkload> next;
  struct WaitForNext {
    std::atomic<bool>& abandon;
    std::future<PreparedWorkload>& next;
    ~WaitForNext() {
      abandon.store(true);
      if (next.valid()) next.wait();
    }
  } wait_for_next{abandon_next, next};

  for (std::size_t i = 0; i < plan.workloads.size(); ++i) {
    const PlannedWorkload& w = plan.workloads[i];
    v1::BenchmarkProgress progress;
    progress.set_workload_index(static_cast<std::uint32_t>(w.index));
    progress.set_workload_count(workload_count);
    progress.set_workload(w.name);
    progress.set_device(backend.name());
    auto base_result = [&](const std::string& impl) {
      v1::WorkloadResult r;
      r.set_workload(w.name);
      *r.mutable_axes() = w.workload.axes();
      r.set_implementation(impl);
      r.set_device(backend.name());
      return r;
    };
    auto record = [&](v1::WorkloadResult r) {
      *progress.add_results() = r;
      run.results.push_back(std::move(r));
    };

    if (should_stop && should_stop()) {
      run.complete = false;
      for (const std::string& impl : plan.implementations) {
        v1::WorkloadResult r = base_result(impl);
        r.set_status(v1::RESULT_STATUS_SKIPPED);
        r.set_error("stopped before this workload (cancelled, deadline or time cap)");
        record(std::move(r));
      }
      env.add_host_wait_seconds(0);
      if (on_progress) on_progress(progress);
      continue;
    }

    const auto wait_start = std::chrono::steady_clock::now();
    PreparedWorkload prepared;
    if (next.valid()) {
      prepared = next.get();
      env.set_workloads_prepared_ahead(env.workloads_prepared_ahead() + 1);
    } else {
      prepared = PrepareWorkload(w, GeneratorThreads(false), nullptr);
    }
    env.add_host_wait_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count());
    if (ahead && i + 1 < plan.workloads.size()) {
      const PlannedWorkload& following = plan.workloads[i + 1];
      if (PreparedBytes(w.problem) + PreparedBytes(following.problem) <= kMaxPreparedAheadBytes) {
        next = std::async(std::launch::async, PrepareWorkload, std::cref(following),
                          GeneratorThreads(true), &abandon_next);
      }
    }

    const Problem& problem = w.problem;
    const HostInputs inputs = prepared.inputs();
    const Reference& reference = prepared.reference;

    for (const std::string& impl : plan.implementations) {
      v1::WorkloadResult result = base_result(impl);
      result.set_bytes_moved(
          BytesMoved(problem.dtype, problem.mode, problem.batch, problem.hidden));
      // Poisoned with 0xff (NaN in every dtype) so that unwritten elements fail the check.
      std::vector<unsigned char> out(problem.TensorBytes(), 0xff);
      std::vector<unsigned char> res(WritesResidual(problem.mode) ? problem.TensorBytes() : 0,
                                     0xff);
      EvaluationSpec spec;
      spec.implementation = impl;
      if (const auto sub = plan.submissions.find(impl); sub != plan.submissions.end()) {
        spec.implementation = sub->second.first;
        if (absl::Status s = backend.AddSubmission(sub->second.second); !s.ok()) {
          result.set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
          result.set_error(s.ToString());
          record(std::move(result));
          continue;
        }
      }
      spec.problem = problem;
      spec.inputs = inputs;
      spec.outputs = {out.data(), res.data()};
      spec.options = options;
      if (const auto sub = plan.submissions.find(impl); sub != plan.submissions.end()) {
        spec.options.tenant = sub->second.second.tenant;
      }
      spec.peaks = peaks;
      spec.reference = &reference;
      spec.tolerance = w.tolerance;
      if (plan.submissions.count(impl) > 0) {
        spec.verification_rounds = kSubmissionVerificationRounds;
      }
      absl::StatusOr<Evaluation> e = Evaluate(backend, spec);
      if (!e.ok()) {
        result.set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
        result.set_error(e.status().ToString());
      } else {
        if (on_samples) on_samples(impl, e->measurement.samples_seconds);
        WriteEvaluation(*e, &result);
        result.mutable_samples_seconds()->Assign(e->measurement.samples_seconds.begin(),
                                                 e->measurement.samples_seconds.end());
        result.set_calls_checked(e->measurement.calls_checked);
        result.mutable_kernels()->Assign(e->measurement.kernels.begin(),
                                         e->measurement.kernels.end());
        const bool too_good = AnnotateMeasurement(e->measurement, problem, device, options,
                                                  e->stats.median, &result, &env);
        if (e->measurement.stopped_early && e->measurement.samples_seconds.empty()) {
          result.set_status(v1::RESULT_STATUS_SKIPPED);
          result.set_error("stopped before any timed sample");
          run.complete = false;
        } else {
          // A wrong answer on fresh inputs, or a time or a traffic the declared bytes do not
          // allow: an anti-cheat finding, reported and never ranked.
          const Verdict verdict = Judge(*e, too_good, result.integrity_flags());
          result.set_status(verdict.status);
          if (!verdict.error.empty()) result.set_error(verdict.error);
          if (e->measurement.stopped_early) run.complete = false;
        }
      }
      record(std::move(result));
    }
    if (on_progress) on_progress(progress);
  }

  *env.mutable_clocks_after() = ReadClocks(backend, &clocks_available);
  env.set_throttled(Throttled(env.clocks_before()) || Throttled(env.clocks_after()));
  return run;
}

void RejectCaughtSubmissions(const std::set<std::string>& submissions,
                             std::vector<v1::WorkloadResult>* results) {
  // The first catch per (implementation, device), in workload order.
  std::map<std::pair<std::string, std::string>, const v1::WorkloadResult*> caught;
  for (const v1::WorkloadResult& r : *results) {
    if (r.status() == v1::RESULT_STATUS_REJECTED && submissions.count(r.implementation()) > 0) {
      caught.emplace(std::make_pair(r.implementation(), r.device()), &r);
    }
  }
  std::map<std::pair<std::string, std::string>, std::string> reasons;
  for (const auto& [key, r] : caught) {
    reasons[key] = absl::StrCat("rejected with the whole run: caught at ", r->workload(), " (",
                                r->error().substr(0, 300), ")");
  }
  for (v1::WorkloadResult& r : *results) {
    const auto it = reasons.find({r.implementation(), r.device()});
    if (it == reasons.end() || r.status() != v1::RESULT_STATUS_PASSED) continue;
    r.set_status(v1::RESULT_STATUS_REJECTED);
    r.set_error(it->second);
  }
}

std::vector<v1::ImplementationSummary> RankResults(std::vector<v1::WorkloadResult>* results) {
  // Best passing median per (workload, device).
  std::map<std::pair<std::string, std::string>, double> best;
  for (const v1::WorkloadResult& r : *results) {
    if (r.status() != v1::RESULT_STATUS_PASSED) continue;
    auto key = std::make_pair(r.workload(), r.device());
    auto it = best.find(key);
    const double median = r.latency().median_seconds();
    if (it == best.end() || median < it->second) best[key] = median;
  }
  for (v1::WorkloadResult& r : *results) {
    if (r.status() != v1::RESULT_STATUS_PASSED) {
      r.set_rank(0);
      continue;
    }
    const double b = best[{r.workload(), r.device()}];
    r.set_vs_best(b > 0 ? r.latency().median_seconds() / b : 1.0);
    std::uint32_t rank = 1;
    for (const v1::WorkloadResult& o : *results) {
      if (o.status() == v1::RESULT_STATUS_PASSED && o.workload() == r.workload() &&
          o.device() == r.device() && o.latency().median_seconds() < r.latency().median_seconds()) {
        ++rank;
      }
    }
    r.set_rank(rank);
  }

  // Per (implementation, device), in first-seen order.
  std::vector<v1::ImplementationSummary> summaries;
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::vector<std::vector<double>> medians, sols;
  for (const v1::WorkloadResult& r : *results) {
    auto key = std::make_pair(r.implementation(), r.device());
    auto [it, inserted] = index.emplace(key, summaries.size());
    if (inserted) {
      v1::ImplementationSummary s;
      s.set_implementation(r.implementation());
      s.set_device(r.device());
      summaries.push_back(s);
      medians.emplace_back();
      sols.emplace_back();
    }
    v1::ImplementationSummary& s = summaries[it->second];
    if (r.status() == v1::RESULT_STATUS_PASSED) {
      s.set_passed(s.passed() + 1);
      medians[it->second].push_back(r.latency().median_seconds());
      if (r.sol_size() > 0) sols[it->second].push_back(r.sol(0).sol_ratio());
    } else if (r.status() != v1::RESULT_STATUS_SKIPPED) {
      s.set_failed(s.failed() + 1);
    }
  }
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    const std::vector<double>& m = medians[i];
    double sum = 0;
    for (double v : m) sum += v;
    summaries[i].set_mean_latency_seconds(m.empty() ? 0 : sum / static_cast<double>(m.size()));
    summaries[i].set_geomean_sol_ratio(GeometricMean(sols[i]));
  }
  // Rank per device among implementations with no failure.
  for (v1::ImplementationSummary& s : summaries) {
    if (s.failed() > 0 || s.passed() == 0) continue;
    std::uint32_t rank = 1;
    double best_mean = s.mean_latency_seconds();
    for (const v1::ImplementationSummary& o : summaries) {
      if (o.failed() > 0 || o.passed() == 0 || o.device() != s.device()) continue;
      if (o.mean_latency_seconds() < s.mean_latency_seconds()) ++rank;
      best_mean = std::min(best_mean, o.mean_latency_seconds());
    }
    s.set_rank(rank);
    s.set_vs_best(best_mean > 0 ? s.mean_latency_seconds() / best_mean : 1.0);
  }
  return summaries;
}

}  // namespace kerneleval::server
