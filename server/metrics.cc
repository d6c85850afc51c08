#include "server/metrics.h"

#include <mutex>

#include "absl/strings/str_cat.h"

namespace kerneleval::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Request latency: 100 us .. 1000 s, ~2.5x steps. A Benchmark RPC (and its device job)
// may run for many minutes (the scheduled benchmark allows 900 s).
const Histogram::BucketBoundaries& RequestBuckets() {
  static const Histogram::BucketBoundaries b{1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
                                             5e-2, 0.1,    0.25, 0.5,  1,      2.5,  5,    10,
                                             25,   50,     100,  250,  500,    1000};
  return b;
}

// Kernel samples: 500 ns .. 1 s; the h2048 suite spans ~1 us to ~50 us on an H200.
const Histogram::BucketBoundaries& KernelBuckets() {
  static const Histogram::BucketBoundaries b{5e-7, 1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5,
                                             1e-4, 2e-4, 5e-4, 1e-3, 1e-2, 0.1,  1};
  return b;
}

// Serializes RecordResult: it removes series, and another thread holding a reference
// from Add() to a removed series would write freed memory.
std::mutex& ResultMutex() {
  static std::mutex mu;
  return mu;
}

template <typename T>
void RemoveIfPresent(prometheus::Family<T>& family, const prometheus::Labels& labels) {
  if (family.Has(labels)) family.Remove(&family.Add(labels));
}

}  // namespace

const char* PeakLabel(v1::PeakSource source) {
  switch (source) {
    case v1::PEAK_SOURCE_DEVICE_ATTRIBUTES:
      return "device_attributes";
    case v1::PEAK_SOURCE_DATASHEET:
      return "datasheet";
    case v1::PEAK_SOURCE_MEASURED_COPY:
      return "measured_copy";
    default:
      return "unknown";
  }
}

const std::vector<std::pair<std::uint64_t, const char*>>& ThrottleReasons() {
  // Bit values of nvmlClocksEventReasons (nvml.h).
  static const std::vector<std::pair<std::uint64_t, const char*>> reasons{
      {0x1, "gpu_idle"},
      {0x2, "applications_clocks_setting"},
      {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},
      {0x10, "sync_boost"},
      {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"},
      {0x80, "hw_power_brake_slowdown"},
      {0x100, "display_clock_setting"},
  };
  return reasons;
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      rpc_requests_(BuildCounter()
                        .Name("kerneleval_rpc_requests_total")
                        .Help("RPCs handled, by method and gRPC status code")
                        .Register(*registry_)),
      rpc_duration_(BuildHistogram()
                        .Name("kerneleval_rpc_duration_seconds")
                        .Help("Time from receiving an RPC to its final status")
                        .Register(*registry_)),
      received_bytes_(BuildCounter()
                          .Name("kerneleval_received_bytes_total")
                          .Help("Serialized request bytes received")
                          .Register(*registry_)),
      sent_bytes_(BuildCounter()
                      .Name("kerneleval_sent_bytes_total")
                      .Help("Serialized response bytes sent")
                      .Register(*registry_)),
      inflight_(BuildGauge()
                    .Name("kerneleval_inflight_requests")
                    .Help("RPCs received and not yet finished")
                    .Register(*registry_)),
      queue_depth_(BuildGauge()
                       .Name("kerneleval_queue_depth")
                       .Help("Jobs waiting for a device")
                       .Register(*registry_)),
      queue_capacity_(BuildGauge()
                          .Name("kerneleval_queue_capacity")
                          .Help("Jobs a device queue accepts before RESOURCE_EXHAUSTED")
                          .Register(*registry_)),
      queue_wait_(BuildHistogram()
                      .Name("kerneleval_queue_wait_seconds")
                      .Help("Time a job waited for its device")
                      .Register(*registry_)),
      compute_(BuildHistogram()
                   .Name("kerneleval_compute_seconds")
                   .Help("Time a job held its device (transfers, calls, checks)")
                   .Register(*registry_)),
      kernel_duration_(BuildHistogram()
                           .Name("kerneleval_kernel_duration_seconds")
                           .Help("Timed calls of an implementation, one observation per sample")
                           .Register(*registry_)),
      benchmark_runs_(BuildCounter()
                          .Name("kerneleval_benchmark_runs_total")
                          .Help("Benchmark runs of named suites by outcome")
                          .Register(*registry_)),
      bench_latency_(BuildGauge()
                         .Name("kerneleval_benchmark_latency_seconds")
                         .Help("Latest median latency per call of a suite workload")
                         .Register(*registry_)),
      bench_bandwidth_(BuildGauge()
                           .Name("kerneleval_benchmark_bandwidth_bytes_per_second")
                           .Help("Latest bytes that must move over the median latency")
                           .Register(*registry_)),
      bench_sol_(BuildGauge()
                     .Name("kerneleval_benchmark_sol_ratio")
                     .Help("Latest speed-of-light ratio (0..1) against the labelled peak")
                     .Register(*registry_)),
      bench_correct_(BuildGauge()
                         .Name("kerneleval_benchmark_correct")
                         .Help("1 if the latest run passed the correctness check, else 0")
                         .Register(*registry_)),
      suite_latency_(BuildGauge()
                         .Name("kerneleval_benchmark_suite_mean_latency_seconds")
                         .Help("Latest mean over a suite's workloads of the median latency")
                         .Register(*registry_)),
      suite_sol_(BuildGauge()
                     .Name("kerneleval_benchmark_suite_sol_ratio")
                     .Help("Latest geometric-mean SOL ratio of a suite (device-attribute peak)")
                     .Register(*registry_)),
      last_run_(BuildGauge()
                    .Name("kerneleval_benchmark_last_run_timestamp_seconds")
                    .Help("Unix time at which the latest run of a suite finished")
                    .Register(*registry_)),
      device_info_(BuildGauge()
                       .Name("kerneleval_device_info")
                       .Help("Devices served, value 1")
                       .Register(*registry_)),
      device_sm_count_(BuildGauge()
                           .Name("kerneleval_device_multiprocessors")
                           .Help("Streaming multiprocessors of a GPU")
                           .Register(*registry_)),
      device_memory_(BuildGauge()
                         .Name("kerneleval_device_memory_bytes")
                         .Help("Memory of a device")
                         .Register(*registry_)),
      device_peak_(BuildGauge()
                       .Name("kerneleval_device_peak_bandwidth_bytes_per_second")
                       .Help("Memory bandwidth peaks SOL is measured against, by source")
                       .Register(*registry_)),
      device_healthy_(BuildGauge()
                          .Name("kerneleval_device_healthy")
                          .Help("1 while a device serves, 0 after a fault until it recovers")
                          .Register(*registry_)),
      gpu_sm_clock_(BuildGauge()
                        .Name("kerneleval_gpu_sm_clock_hertz")
                        .Help("Current SM clock (NVML)")
                        .Register(*registry_)),
      gpu_mem_clock_(BuildGauge()
                         .Name("kerneleval_gpu_memory_clock_hertz")
                         .Help("Current memory clock (NVML)")
                         .Register(*registry_)),
      gpu_temperature_(BuildGauge()
                           .Name("kerneleval_gpu_temperature_celsius")
                           .Help("GPU temperature (NVML)")
                           .Register(*registry_)),
      gpu_power_(BuildGauge()
                     .Name("kerneleval_gpu_power_watts")
                     .Help("GPU power draw (NVML)")
                     .Register(*registry_)),
      gpu_memory_used_(BuildGauge()
                           .Name("kerneleval_gpu_memory_used_bytes")
                           .Help("GPU memory in use (NVML)")
                           .Register(*registry_)),
      gpu_throttle_(BuildGauge()
                        .Name("kerneleval_gpu_throttle_active")
                        .Help("1 while an NVML clocks-event (throttle) reason is active")
                        .Register(*registry_)),
      build_info_(BuildGauge()
                      .Name("kerneleval_build_info")
                      .Help("Build of the server, value 1")
                      .Register(*registry_)),
      ready_(BuildGauge()
                 .Name("kerneleval_ready")
                 .Help("1 while the readiness health status is SERVING")
                 .Register(*registry_)) {}

void Metrics::RpcStarted(const std::string& method) {
  inflight_.Add({{"method", method}}).Increment();
}

void Metrics::RpcFinished(const std::string& method, const std::string& code, double seconds,
                          std::size_t received_bytes, std::size_t sent_bytes) {
  inflight_.Add({{"method", method}}).Decrement();
  rpc_requests_.Add({{"method", method}, {"code", code}}).Increment();
  rpc_duration_.Add({{"method", method}}, RequestBuckets()).Observe(seconds);
  received_bytes_.Add({{"method", method}}).Increment(static_cast<double>(received_bytes));
  sent_bytes_.Add({{"method", method}}).Increment(static_cast<double>(sent_bytes));
}

void Metrics::RpcRejected(const std::string& method, const std::string& code) {
  rpc_requests_.Add({{"method", method}, {"code", code}}).Increment();
}

void Metrics::SetDevice(const v1::Device& d) {
  device_info_
      .Add({{"device", d.name()},
            {"kind", d.kind()},
            {"model", d.model()},
            {"uuid", d.uuid()},
            {"compute_capability", d.compute_capability()}})
      .Set(1);
  if (d.sm_count() > 0) device_sm_count_.Add({{"device", d.name()}}).Set(d.sm_count());
  device_memory_.Add({{"device", d.name()}}).Set(static_cast<double>(d.memory_bytes()));
  const std::pair<v1::PeakSource, double> peaks[] = {
      {v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, d.peak_bytes_per_second()},
      {v1::PEAK_SOURCE_DATASHEET, d.datasheet_bytes_per_second()},
      {v1::PEAK_SOURCE_MEASURED_COPY, d.measured_copy_bytes_per_second()}};
  for (const auto& [source, value] : peaks) {
    if (value > 0)
      device_peak_.Add({{"device", d.name()}, {"source", PeakLabel(source)}}).Set(value);
  }
  device_healthy_.Add({{"device", d.name()}}).Set(d.healthy() ? 1 : 0);
  queue_capacity_.Add({{"device", d.name()}}).Set(d.queue_capacity());
  queue_depth_.Add({{"device", d.name()}});
}

void Metrics::SetDeviceHealthy(const std::string& device, bool healthy) {
  device_healthy_.Add({{"device", device}}).Set(healthy ? 1 : 0);
}

void Metrics::SetQueueDepth(const std::string& device, std::size_t depth) {
  queue_depth_.Add({{"device", device}}).Set(static_cast<double>(depth));
}

void Metrics::ObserveQueueWait(const std::string& device, double seconds) {
  queue_wait_.Add({{"device", device}}, RequestBuckets()).Observe(seconds);
}

void Metrics::ObserveCompute(const std::string& device, double seconds) {
  compute_.Add({{"device", device}}, RequestBuckets()).Observe(seconds);
}

void Metrics::ObserveKernelSamples(const std::string& implementation, const std::string& device,
                                   const std::vector<double>& samples_seconds) {
  auto& h = kernel_duration_.Add({{"implementation", implementation}, {"device", device}},
                                 KernelBuckets());
  for (double s : samples_seconds) h.Observe(s);
}

void Metrics::RecordResult(const std::string& suite, const v1::WorkloadResult& r) {
  const prometheus::Labels labels{{"suite", suite},
                                  {"workload", r.workload()},
                                  {"implementation", r.implementation()},
                                  {"device", r.device()}};
  std::lock_guard<std::mutex> lock(ResultMutex());
  // A result that never ran has no verdict: its failure shows in benchmark_runs_total.
  if (r.status() == v1::RESULT_STATUS_RUNTIME_ERROR) {
    RemoveIfPresent(bench_correct_, labels);
  } else {
    bench_correct_.Add(labels).Set(r.correctness().passed() ? 1 : 0);
  }
  // The gauges hold the latest run: figures this run does not have (a runtime error, or a
  // peak it was not measured against) are removed rather than left from an earlier run.
  const bool measured =
      r.status() == v1::RESULT_STATUS_PASSED || r.status() == v1::RESULT_STATUS_INCORRECT;
  if (measured) {
    bench_latency_.Add(labels).Set(r.latency().median_seconds());
    bench_bandwidth_.Add(labels).Set(r.bytes_per_second());
  } else {
    RemoveIfPresent(bench_latency_, labels);
    RemoveIfPresent(bench_bandwidth_, labels);
  }
  for (v1::PeakSource source : {v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, v1::PEAK_SOURCE_DATASHEET,
                                v1::PEAK_SOURCE_MEASURED_COPY}) {
    prometheus::Labels l = labels;
    l["peak"] = PeakLabel(source);
    const v1::SolFigure* figure = nullptr;
    for (const v1::SolFigure& f : r.sol()) {
      if (f.source() == source) figure = &f;
    }
    if (measured && figure != nullptr) {
      bench_sol_.Add(l).Set(figure->sol_ratio());
    } else {
      RemoveIfPresent(bench_sol_, l);
    }
  }
}

void Metrics::RecordSummary(const std::string& suite, const v1::ImplementationSummary& s) {
  const prometheus::Labels labels{
      {"suite", suite}, {"implementation", s.implementation()}, {"device", s.device()}};
  suite_latency_.Add(labels).Set(s.mean_latency_seconds());
  suite_sol_.Add(labels).Set(s.geomean_sol_ratio());
}

void Metrics::RecordBenchmarkRun(const std::string& suite, const std::string& device,
                                 const std::string& result, double unix_seconds) {
  // Every outcome's series exists from a suite's first run on, at 0 until it happens, so
  // that increase() sees the first increment of an outcome (a series that appears with
  // value 1 has no earlier sample to increase from).
  for (const char* outcome : {"complete", "incomplete", "error"}) {
    benchmark_runs_.Add({{"suite", suite}, {"device", device}, {"result", outcome}});
  }
  benchmark_runs_.Add({{"suite", suite}, {"device", device}, {"result", result}}).Increment();
  last_run_.Add({{"suite", suite}, {"device", device}}).Set(unix_seconds);
}

void Metrics::SetClocks(const std::string& device, const v1::Clocks& c) {
  gpu_sm_clock_.Add({{"device", device}}).Set(c.sm_mhz() * 1e6);
  gpu_mem_clock_.Add({{"device", device}}).Set(c.memory_mhz() * 1e6);
  gpu_temperature_.Add({{"device", device}}).Set(c.temperature_c());
  gpu_power_.Add({{"device", device}}).Set(c.power_watts());
  gpu_memory_used_.Add({{"device", device}}).Set(static_cast<double>(c.memory_used_bytes()));
  for (const auto& [bit, label] : ThrottleReasons()) {
    gpu_throttle_.Add({{"device", device}, {"reason", label}})
        .Set((c.throttle_reasons() & bit) != 0 ? 1 : 0);
  }
}

void Metrics::SetBuildInfo(const std::string& version, const std::string& git_revision,
                           const std::string& cuda_runtime) {
  build_info_
      .Add({{"version", version}, {"git_revision", git_revision}, {"cuda_runtime", cuda_runtime}})
      .Set(1);
}

void Metrics::SetReady(bool ready) { ready_.Add({}).Set(ready ? 1 : 0); }

}  // namespace kerneleval::server
