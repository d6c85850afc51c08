#include "server/evaluation/benchmark_engine.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_name.h"
#include "server/device/measure_options.h"
#include "server/evaluation/evaluation.h"
#include "server/evaluation/measurement_checks.h"
#include "server/evaluation/server_version.h"
#include "server/evaluation/workload_preparation.h"
#include "server/figures/sol.h"
#include "server/figures/statistics.h"

namespace kerneleval::server {
namespace {

// Reasons that mean the clocks were held back, not merely idle or set by the admin.
constexpr std::uint64_t kBenignThrottleBits = 0x1 | 0x2 | 0x100;

bool Throttled(const v1::Clocks& c) { return (c.throttle_reasons() & ~kBenignThrottleBits) != 0; }

// The environment known before the first workload: the device, versions, host, timer, and
// the clocks before.
v1::Environment StartEnvironment(Backend& backend, const v1::Device& device) {
  v1::Environment env;
  *env.mutable_device() = device;
  env.set_driver_version(backend.DriverVersion());
  env.set_cuda_runtime_version(backend.RuntimeVersion());
  env.set_server_version(ServerVersion());
  env.set_git_revision(GitRevision());
  env.set_timestamp(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  env.set_hostname(HostName());
  env.set_cupti_status(backend.TimerStatus());
  bool clocks_available = false;
  *env.mutable_clocks_before() = backend.ReadClocks(&clocks_available);
  env.set_clocks_available(clocks_available);
  return env;
}

// The clocks after the last workload, and whether they were held back before or after.
void FinishEnvironment(Backend& backend, v1::Environment* env) {
  bool clocks_available = false;
  *env->mutable_clocks_after() = backend.ReadClocks(&clocks_available);
  env->set_throttled(Throttled(env->clocks_before()) || Throttled(env->clocks_after()));
}

// The workloads of one plan on one device: every implementation evaluated on each, every
// outcome a result in `run` and in the workload's progress. Failures become results.
class DeviceBenchmark {
 public:
  DeviceBenchmark(Backend& backend, const BenchmarkPlan& plan, const v1::Device& device,
                  const std::function<bool()>& should_stop, const SampleObserver& on_samples,
                  DeviceRun* run)
      : backend_(backend),
        plan_(plan),
        device_(device),
        peaks_(PeaksFor(device, plan.protocol.measure_copy_bandwidth())),
        options_(ToMeasureOptions(plan.protocol)),
        on_samples_(on_samples),
        run_(*run) {
    options_.should_stop = should_stop;
  }

  // The progress of workload `w`, its results to be added.
  v1::BenchmarkProgress StartProgress(const PlannedWorkload& w) const {
    v1::BenchmarkProgress progress;
    progress.set_workload_index(static_cast<std::uint32_t>(w.index));
    progress.set_workload_count(static_cast<std::uint32_t>(plan_.workloads.size()));
    progress.set_workload(w.name);
    progress.set_device(backend_.name());
    return progress;
  }

  // The run was stopped before `w`: every implementation's result for it is SKIPPED.
  void Skip(const PlannedWorkload& w, v1::BenchmarkProgress* progress) {
    run_.complete = false;
    for (const std::string& impl : plan_.implementations) {
      v1::WorkloadResult r = ResultHeader(w, impl);
      r.set_status(v1::RESULT_STATUS_SKIPPED);
      r.set_error("stopped before this workload (cancelled, deadline or time cap)");
      Record(std::move(r), progress);
    }
    run_.environment.add_host_wait_seconds(0);
  }

  // Every implementation of the plan on `w`, whose inputs and reference are `prepared`.
  void Measure(const PlannedWorkload& w, const PreparedWorkload& prepared,
               v1::BenchmarkProgress* progress) {
    for (const std::string& impl : plan_.implementations) {
      Record(EvaluateImplementation(w, prepared, impl), progress);
    }
  }

 private:
  v1::WorkloadResult ResultHeader(const PlannedWorkload& w, const std::string& impl) const {
    v1::WorkloadResult r;
    r.set_workload(w.name);
    *r.mutable_axes() = w.workload.axes();
    r.set_implementation(impl);
    r.set_device(backend_.name());
    return r;
  }

  void Record(v1::WorkloadResult r, v1::BenchmarkProgress* progress) {
    *progress->add_results() = r;
    run_.results.push_back(std::move(r));
  }

  // One implementation on one workload: a submission is loaded first, then evaluated with
  // its verification rounds, in its owner's tenant.
  v1::WorkloadResult EvaluateImplementation(const PlannedWorkload& w,
                                            const PreparedWorkload& prepared,
                                            const std::string& impl) {
    const Problem& problem = w.problem;
    v1::WorkloadResult result = ResultHeader(w, impl);
    result.set_bytes_moved(BytesMoved(problem.dtype, problem.mode, problem.batch, problem.hidden));
    // Poisoned with 0xff (NaN in every dtype) so that unwritten elements fail the check.
    std::vector<unsigned char> out(problem.TensorBytes(), 0xff);
    std::vector<unsigned char> res(WritesResidual(problem.mode) ? problem.TensorBytes() : 0, 0xff);
    EvaluationSpec spec;
    spec.implementation = impl;
    spec.problem = problem;
    spec.inputs = prepared.inputs();
    spec.outputs = {out.data(), res.data()};
    spec.options = options_;
    spec.peaks = peaks_;
    spec.reference = &prepared.reference;
    spec.tolerance = w.tolerance;
    if (const auto sub = plan_.submissions.find(impl); sub != plan_.submissions.end()) {
      if (absl::Status s = backend_.AddSubmission(sub->second.second); !s.ok()) {
        result.set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
        result.set_error(s.ToString());
        return result;
      }
      spec.implementation = sub->second.first;
      spec.options.tenant = sub->second.second.tenant;
      spec.verification_rounds = kSubmissionVerificationRounds;
    }
    absl::StatusOr<Evaluation> e = Evaluate(backend_, spec);
    if (!e.ok()) {
      result.set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
      result.set_error(e.status().ToString());
      return result;
    }
    if (on_samples_) on_samples_(impl, e->measurement.samples_seconds);
    WriteOutcome(*e, problem, &result);
    return result;
  }

  // A finished evaluation into its result: the numbers, the measurement's checks, and the
  // verdict, or SKIPPED where it was stopped before any timed sample.
  void WriteOutcome(const Evaluation& e, const Problem& problem, v1::WorkloadResult* result) {
    WriteEvaluation(e, result);
    result->mutable_samples_seconds()->Assign(e.measurement.samples_seconds.begin(),
                                              e.measurement.samples_seconds.end());
    result->set_calls_checked(e.measurement.calls_checked);
    result->mutable_kernels()->Assign(e.measurement.kernels.begin(), e.measurement.kernels.end());
    const IntegrityFindings findings = AnnotateMeasurement(
        e.measurement, problem, device_, options_, e.stats.median, result, &run_.environment);
    if (e.measurement.stopped_early && e.measurement.samples_seconds.empty()) {
      result->set_status(v1::RESULT_STATUS_SKIPPED);
      result->set_error("stopped before any timed sample");
      run_.complete = false;
      return;
    }
    // A wrong answer on fresh inputs, or a time or a traffic the declared bytes do not
    // allow: an anti-cheat finding, reported and never ranked.
    // (A Benchmark result carries no tensors, so withhold_outputs has nothing to hold back.)
    const Verdict verdict =
        Judge(e, findings, plan_.submissions.count(result->implementation()) > 0);
    result->set_status(verdict.status);
    if (!verdict.error.empty()) result->set_error(verdict.error);
    if (e.measurement.stopped_early) {
      run_.complete = false;
      // Cut mid-measurement: its samples are kept, but 5 of 50 calls are not the result the
      // protocol asked for, so it must not pass into baselines, windows or leaderboards. A
      // wrong answer stays wrong.
      if (result->status() == v1::RESULT_STATUS_PASSED) {
        result->set_status(v1::RESULT_STATUS_SKIPPED);
        result->set_error(absl::StrCat("stopped after ", e.measurement.samples_seconds.size(),
                                       " timed samples (cancelled, deadline or time cap): not a "
                                       "full result"));
      }
    }
  }

  Backend& backend_;
  const BenchmarkPlan& plan_;
  const v1::Device& device_;
  const std::vector<PeakBandwidth> peaks_;
  MeasureOptions options_;
  const SampleObserver& on_samples_;
  DeviceRun& run_;
};

}  // namespace

DeviceRun BenchmarkOnDevice(Backend& backend, const BenchmarkPlan& plan,
                            const std::function<void(const v1::BenchmarkProgress&)>& on_progress,
                            const std::function<bool()>& should_stop,
                            const SampleObserver& on_samples) {
  DeviceRun run;
  const v1::Device device = backend.Describe();
  run.environment = StartEnvironment(backend, device);
  DeviceBenchmark benchmark(backend, plan, device, should_stop, on_samples, &run);
  // On every path out, its destructor abandons a preparation still under way and waits for it.
  WorkloadPreparation preparation(backend, plan);
  for (std::size_t i = 0; i < plan.workloads.size(); ++i) {
    const PlannedWorkload& w = plan.workloads[i];
    v1::BenchmarkProgress progress = benchmark.StartProgress(w);
    if (should_stop && should_stop()) {
      benchmark.Skip(w, &progress);
    } else {
      benchmark.Measure(w, preparation.Take(i, &run.environment), &progress);
    }
    if (on_progress) on_progress(progress);
  }
  FinishEnvironment(backend, &run.environment);
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
