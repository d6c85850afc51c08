// The metric schema of a benchmark report: the one place that turns a v1::BenchmarkReport
// into Prometheus series. The server's /metrics (server/metrics/metrics.h) and the CLI's
// Pushgateway push (client/push.h) both write reports through ReportMetrics, so the names, help
// texts, labels and the rules below cannot drift apart.
//
// Series (gauges holding the latest run of a key):
//   kerneleval_benchmark_latency_seconds             median latency of a workload
//   kerneleval_benchmark_bandwidth_bytes_per_second  bytes that must move / median
//   kerneleval_benchmark_sol_ratio{peak}             T_sol / median, one series per peak
//   kerneleval_benchmark_correct                     1 passed the reference check, 0 failed
//   kerneleval_benchmark_suite_mean_latency_seconds  mean over workloads of the medians
//   kerneleval_benchmark_suite_sol_ratio{peak}       geometric-mean SOL ratio
//   kerneleval_benchmark_runtime_errors              results of the run that did not execute
//   kerneleval_benchmark_last_run_timestamp_seconds  when the run finished
// Labels: suite, workload, implementation, device, uuid (the GPU's, empty on a CPU), model
// (the device name NVML and CUDA report, so that the rules compare a GPU with the fleet of
// its model without a join), node, protocol (common/protocol.h ProtocolLabel), and peak where the
// figure depends on it.
//
// Rules: a skipped result (cancelled, out of time) changes nothing. A runtime error has no
// verdict and no figures: its correct / latency / bandwidth / SOL series are removed (not
// set to 0, which would claim a wrong result) and it counts in runtime_errors. Figures a
// result lacks (a peak it was not measured against) are removed rather than left from an
// earlier run. Suite figures exist only for implementations that passed every workload.
//
// Thread-safety: Record and RemoveImplementation may not run concurrently with each other
// or with a writer holding a series of these families; callers serialize (server/metrics/metrics.cc
// holds one mutex, a push builds a registry of its own).
#pragma once

#include <string>
#include <string_view>

#include "kerneleval/v1/kerneleval.pb.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace kerneleval::metrics {

namespace v1 = ::kerneleval::v1;

// The suite a report belongs to: its named suite, else its definition's name.
std::string ReportSuite(const v1::BenchmarkReport& report);

// The outcome of a report on one device: "error" if a result there hit a runtime error,
// else "complete" or "incomplete" (cut short).
std::string DeviceOutcome(const v1::BenchmarkReport& report, const std::string& device);

class ReportMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit ReportMetrics(prometheus::Registry& registry);

  // Writes the report's series under `node` (empty: no node value). `unix_seconds` is the
  // last-run time of every device of the report.
  void Record(const v1::BenchmarkReport& report, const std::string& node, double unix_seconds);

  // Removes every series of `implementation` (bounded series of submitted kernels).
  void RemoveImplementation(const std::string& implementation);

  // Removes every series of `device` whose uuid differs from `uuid`.
  void RemoveDeviceUuidOtherThan(const std::string& device, const std::string& uuid);

 private:
  prometheus::Family<prometheus::Gauge>& latency_;
  prometheus::Family<prometheus::Gauge>& bandwidth_;
  prometheus::Family<prometheus::Gauge>& sol_;
  prometheus::Family<prometheus::Gauge>& correct_;
  prometheus::Family<prometheus::Gauge>& suite_latency_;
  prometheus::Family<prometheus::Gauge>& suite_sol_;
  prometheus::Family<prometheus::Gauge>& runtime_errors_;
  prometheus::Family<prometheus::Gauge>& last_run_;
};

// Removes the series of `family` whose label `name` has value `value` (and, when
// `unless_value` is given, whose label `unless_name` does not have it). `make` re-creates a
// series' handle for Remove() (histograms need their buckets).
template <typename T, typename Make>
void RemoveSeriesWhere(prometheus::Family<T>& family, const std::string& name,
                       const std::string& value, const std::string& unless_name,
                       const std::string& unless_value, Make make) {
  for (const prometheus::MetricFamily& f : family.Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      prometheus::Labels labels;
      for (const prometheus::ClientMetric::Label& l : m.label) labels[l.name] = l.value;
      const auto it = labels.find(name);
      if (it == labels.end() || it->second != value) continue;
      if (!unless_name.empty()) {
        const auto u = labels.find(unless_name);
        if ((u == labels.end() ? std::string() : u->second) == unless_value) continue;
      }
      if (family.Has(labels)) family.Remove(&make(labels));
    }
  }
}

template <typename T>
void RemoveSeriesWhere(prometheus::Family<T>& family, const std::string& name,
                       const std::string& value, const std::string& unless_name = "",
                       const std::string& unless_value = "") {
  RemoveSeriesWhere(family, name, value, unless_name, unless_value,
                    [&family](const prometheus::Labels& l) -> T& { return family.Add(l); });
}

}  // namespace kerneleval::metrics
