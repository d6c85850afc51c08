#include "metrics/report_metrics.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/conversions.h"
#include "common/protocol.h"

namespace kerneleval::metrics {
namespace {

using prometheus::BuildGauge;

template <typename T>
void RemoveIfPresent(prometheus::Family<T>& family, const prometheus::Labels& labels) {
  if (family.Has(labels)) family.Remove(&family.Add(labels));
}

prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return BuildGauge().Name(name).Help(help).Register(r);
}

// A result's SOL ratio against each peak it has, one series a peak; a result not measured, or
// without a figure for a peak, leaves no series for it.
void RecordSol(prometheus::Family<prometheus::Gauge>& sol, const prometheus::Labels& labels,
               const v1::WorkloadResult& r, bool measured) {
  for (v1::PeakSource source : {v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, v1::PEAK_SOURCE_DATASHEET,
                                v1::PEAK_SOURCE_MEASURED_COPY}) {
    prometheus::Labels l = labels;
    l["peak"] = PeakSourceShortName(source);
    const v1::SolFigure* figure = nullptr;
    for (const v1::SolFigure& f : r.sol()) {
      if (f.source() == source) figure = &f;
    }
    if (measured && figure != nullptr) {
      sol.Add(l).Set(figure->sol_ratio());
    } else {
      RemoveIfPresent(sol, l);
    }
  }
}

}  // namespace

std::string ReportSuite(const v1::BenchmarkReport& report) {
  return !report.suite().empty() ? report.suite() : report.definition().name();
}

std::string DeviceOutcome(const v1::BenchmarkReport& report, const std::string& device) {
  for (const v1::WorkloadResult& r : report.results()) {
    if (r.device() == device && r.status() == v1::RESULT_STATUS_RUNTIME_ERROR) return "error";
  }
  return report.complete() ? "complete" : "incomplete";
}

ReportMetrics::ReportMetrics(prometheus::Registry& r)
    : latency_(Gauge(r, "kerneleval_benchmark_latency_seconds",
                     "Latest median latency per call of a suite workload")),
      bandwidth_(Gauge(r, "kerneleval_benchmark_bandwidth_bytes_per_second",
                       "Latest bytes that must move over the median latency")),
      sol_(Gauge(r, "kerneleval_benchmark_sol_ratio",
                 "Latest speed-of-light ratio (0..1) against the labelled peak")),
      correct_(Gauge(r, "kerneleval_benchmark_correct",
                     "1 if the latest run passed the correctness check, 0 if it failed; absent "
                     "after a runtime error")),
      suite_latency_(Gauge(r, "kerneleval_benchmark_suite_mean_latency_seconds",
                           "Latest mean over a suite's workloads of the median latency")),
      suite_sol_(Gauge(r, "kerneleval_benchmark_suite_sol_ratio",
                       "Latest geometric-mean SOL ratio of a suite against the labelled peak")),
      runtime_errors_(Gauge(r, "kerneleval_benchmark_runtime_errors",
                            "Results of the latest run of a suite that ended in a runtime error")),
      last_run_(Gauge(r, "kerneleval_benchmark_last_run_timestamp_seconds",
                      "Unix time at which the latest run of a suite finished")) {}

void ReportMetrics::Record(const v1::BenchmarkReport& report, const std::string& node,
                           double unix_seconds) {
  const std::string suite = ReportSuite(report);
  const std::string protocol = ProtocolLabel(report.protocol());
  std::map<std::string, const v1::Device*> devices;
  for (const v1::Environment& env : report.environments()) {
    devices[env.device().name()] = &env.device();
  }
  auto device_labels = [&](const std::string& device) {
    const auto it = devices.find(device);
    const v1::Device* d = it != devices.end() ? it->second : nullptr;
    return prometheus::Labels{{"suite", suite},
                              {"device", device},
                              {"uuid", d != nullptr ? d->uuid() : ""},
                              {"model", d != nullptr ? d->model() : ""},
                              {"node", node},
                              {"protocol", protocol}};
  };

  std::map<std::string, int> runtime_errors;  // device -> count
  for (const v1::WorkloadResult& r : report.results()) {
    if (r.status() == v1::RESULT_STATUS_SKIPPED) continue;
    prometheus::Labels labels = device_labels(r.device());
    labels["workload"] = r.workload();
    labels["implementation"] = r.implementation();
    const bool measured =
        r.status() == v1::RESULT_STATUS_PASSED || r.status() == v1::RESULT_STATUS_INCORRECT;
    if (r.status() == v1::RESULT_STATUS_RUNTIME_ERROR) ++runtime_errors[r.device()];
    if (measured) {
      correct_.Add(labels).Set(r.correctness().passed() ? 1 : 0);
      latency_.Add(labels).Set(r.latency().median_seconds());
      bandwidth_.Add(labels).Set(r.bytes_per_second());
    } else {
      RemoveIfPresent(correct_, labels);
      RemoveIfPresent(latency_, labels);
      RemoveIfPresent(bandwidth_, labels);
    }
    RecordSol(sol_, labels, r, measured);
  }

  // The engine's geometric mean takes each result's first SOL figure: the device-attribute
  // peak on a GPU, the measured copy on a CPU (server/evaluation/benchmark_engine.cc, RankResults).
  std::map<std::pair<std::string, std::string>, v1::PeakSource> summary_peaks;
  for (const v1::WorkloadResult& r : report.results()) {
    if (r.sol_size() > 0)
      summary_peaks.emplace(std::make_pair(r.implementation(), r.device()), r.sol(0).source());
  }
  for (const v1::ImplementationSummary& s : report.summaries()) {
    prometheus::Labels labels = device_labels(s.device());
    labels["implementation"] = s.implementation();
    prometheus::Labels sol_labels = labels;
    const auto peak = summary_peaks.find({s.implementation(), s.device()});
    sol_labels["peak"] = PeakSourceShortName(
        peak != summary_peaks.end() ? peak->second : v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
    if (s.failed() == 0 && s.passed() > 0) {
      suite_latency_.Add(labels).Set(s.mean_latency_seconds());
      suite_sol_.Add(sol_labels).Set(s.geomean_sol_ratio());
    } else {
      RemoveIfPresent(suite_latency_, labels);
      RemoveIfPresent(suite_sol_, sol_labels);
    }
  }

  for (const v1::Environment& env : report.environments()) {
    const prometheus::Labels labels = device_labels(env.device().name());
    runtime_errors_.Add(labels).Set(runtime_errors[env.device().name()]);
    last_run_.Add(labels).Set(unix_seconds);
  }
}

void ReportMetrics::RemoveImplementation(const std::string& implementation) {
  for (auto* family : {&latency_, &bandwidth_, &sol_, &correct_, &suite_latency_, &suite_sol_}) {
    RemoveSeriesWhere(*family, "implementation", implementation);
  }
}

void ReportMetrics::RemoveDeviceUuidOtherThan(const std::string& device, const std::string& uuid) {
  for (auto* family : {&latency_, &bandwidth_, &sol_, &correct_, &suite_latency_, &suite_sol_,
                       &runtime_errors_, &last_run_}) {
    RemoveSeriesWhere(*family, "device", device, "uuid", uuid);
  }
}

}  // namespace kerneleval::metrics
