#include "server/benchmark_engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/correctness.h"
#include "server/input_generator.h"
#include "server/request_validation.h"
#include "server/sol.h"
#include "server/statistics.h"
#include "server/suites.h"

#ifndef KERNELEVAL_VERSION
#define KERNELEVAL_VERSION "0.0.0"
#endif
#ifndef KERNELEVAL_GIT_REVISION
#define KERNELEVAL_GIT_REVISION "unknown"
#endif

namespace kerneleval::server {
namespace {

// Reasons that mean the clocks were held back, not merely idle or set by the admin.
constexpr std::uint64_t kBenignThrottleBits = 0x1 | 0x2 | 0x100;

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

std::vector<PeakBandwidth> PeaksFor(const v1::Device& d, bool with_measured_copy) {
  std::vector<PeakBandwidth> peaks;
  if (d.peak_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, d.peak_bytes_per_second()});
  }
  if (d.datasheet_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_DATASHEET, d.datasheet_bytes_per_second()});
  }
  // A CPU has no attribute or datasheet peak: its measured copy bandwidth is the reference.
  if ((with_measured_copy || peaks.empty()) && d.measured_copy_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_MEASURED_COPY, d.measured_copy_bytes_per_second()});
  }
  return peaks;
}

v1::Clocks ReadClocks(Backend& backend, bool* available) { return backend.ReadClocks(available); }

bool Throttled(const v1::Clocks& c) { return (c.throttle_reasons() & ~kBenignThrottleBits) != 0; }

}  // namespace

std::string ServerVersion() { return KERNELEVAL_VERSION; }
std::string GitRevision() { return KERNELEVAL_GIT_REVISION; }

DeviceRun RunSuiteOnDevice(Backend& backend, const BenchmarkPlan& plan,
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
  env.set_hostname(Hostname());
  env.set_cupti_status(backend.TimerStatus());
  bool clocks_available = false;
  *env.mutable_clocks_before() = ReadClocks(backend, &clocks_available);
  env.set_clocks_available(clocks_available);

  const v1::SuiteDefinition& suite = plan.suite;
  const std::vector<PeakBandwidth> peaks =
      PeaksFor(device, plan.protocol.measure_copy_bandwidth());
  MeasureOptions options = ToMeasureOptions(plan.protocol);
  options.should_stop = should_stop;
  const DType dtype = *DTypeFromProto(suite.dtype(), "dtype");
  const Mode mode = *ModeFromProto(suite.mode(), "mode");

  const int workload_count = suite.workloads_size();
  for (int wi = 0; wi < workload_count; ++wi) {
    const v1::Workload& workload = suite.workloads(wi);
    const std::string workload_name = WorkloadName(suite, workload);
    v1::BenchmarkProgress progress;
    progress.set_workload_index(static_cast<std::uint32_t>(wi));
    progress.set_workload_count(static_cast<std::uint32_t>(workload_count));
    progress.set_workload(workload_name);
    progress.set_device(backend.name());

    auto base_result = [&](const std::string& impl) {
      v1::WorkloadResult r;
      r.set_workload(workload_name);
      *r.mutable_axes() = workload.axes();
      r.set_implementation(impl);
      r.set_device(backend.name());
      return r;
    };

    if (should_stop && should_stop()) {
      run.complete = false;
      for (const std::string& impl : plan.implementations) {
        v1::WorkloadResult r = base_result(impl);
        r.set_status(v1::RESULT_STATUS_SKIPPED);
        r.set_error("stopped before this workload (cancelled, deadline or time cap)");
        run.results.push_back(r);
        *progress.add_results() = r;
      }
      if (on_progress) on_progress(progress);
      continue;
    }

    const WorkloadShape shape = *ResolveShape(suite, workload);
    Problem problem;
    problem.dtype = dtype;
    problem.mode = mode;
    problem.batch = shape.batch;
    problem.hidden = shape.hidden;
    problem.eps = static_cast<float>(suite.eps() > 0 ? suite.eps() : kDefaultEps);

    const std::uint64_t seed = workload.seed() != 0 ? workload.seed() : plan.protocol.seed();
    const std::size_t n = problem.RowElements();
    const auto x = RandomTensor(dtype, n, DeriveSeed(seed, "hidden_states", wi));
    const auto r = RandomTensor(dtype, n, DeriveSeed(seed, "residual", wi));
    const auto w = RandomTensor(dtype, static_cast<std::size_t>(shape.hidden),
                                DeriveSeed(seed, "weight", wi));
    std::vector<double> ref_out(n), ref_res(WritesResidual(mode) ? n : 0);
    FusedAddRmsNormReference(dtype, shape.batch, shape.hidden, problem.eps, x.data(), r.data(),
                             w.data(), ref_out.data(),
                             WritesResidual(mode) ? ref_res.data() : nullptr);
    const v1::Tolerance tolerance = ResolveTolerance(dtype, workload.tolerance());
    const std::uint64_t bytes = BytesMoved(dtype, mode, shape.batch, shape.hidden);

    for (const std::string& impl : plan.implementations) {
      v1::WorkloadResult result = base_result(impl);
      result.set_bytes_moved(bytes);
      // Poisoned with 0xff (NaN in every dtype) so that unwritten elements fail the check.
      std::vector<unsigned char> out(problem.RowBytes(), 0xff);
      std::vector<unsigned char> res(WritesResidual(mode) ? problem.RowBytes() : 0, 0xff);
      absl::StatusOr<Measurement> m =
          backend.Measure(problem, {x.data(), r.data(), w.data()}, {out.data(), res.data()},
                          impl, options);
      if (!m.ok()) {
        result.set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
        result.set_error(m.status().ToString());
      } else {
        result.set_timer(m->timer);
        if (on_samples) on_samples(impl, m->samples_seconds);
        const SampleStats stats = ComputeStats(m->samples_seconds);
        ToProto(stats, result.mutable_latency());
        if (stats.median > 0) result.set_bytes_per_second(static_cast<double>(bytes) / stats.median);
        for (v1::SolFigure& f : SolFigures(bytes, stats.median, peaks)) *result.add_sol() = f;
        v1::Correctness c = CheckAgainstReference(dtype, out.data(), ref_out.data(), n, tolerance);
        if (WritesResidual(mode)) {
          c = MergeCorrectness(
              c, CheckAgainstReference(dtype, res.data(), ref_res.data(), n, tolerance));
        }
        *result.mutable_correctness() = c;
        if (m->stopped_early && m->samples_seconds.empty()) {
          result.set_status(v1::RESULT_STATUS_SKIPPED);
          result.set_error("stopped before any timed sample");
          run.complete = false;
        } else {
          result.set_status(c.passed() ? v1::RESULT_STATUS_PASSED : v1::RESULT_STATUS_INCORRECT);
          if (m->stopped_early) run.complete = false;
        }
      }
      run.results.push_back(result);
      *progress.add_results() = result;
    }
    if (on_progress) on_progress(progress);
  }

  *env.mutable_clocks_after() = ReadClocks(backend, &clocks_available);
  env.set_throttled(Throttled(env.clocks_before()) || Throttled(env.clocks_after()));
  return run;
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
