// Prometheus metrics of the service (prometheus-cpp). Names follow Prometheus conventions
// (base units, `_total` counters) and pass `promtool check metrics`. Label values are
// bounded: methods, gRPC code names, devices, implementations, and suite / workload names
// of suites loaded at start (custom suites sent in requests are not exported per workload).
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kerneleval::server {

class Metrics {
 public:
  Metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // RPCs.
  void RpcStarted(const std::string& method);
  void RpcFinished(const std::string& method, const std::string& code, double seconds,
                   std::size_t received_bytes, std::size_t sent_bytes);
  // A call refused before it reached a handler (authentication): counted by code only.
  void RpcRejected(const std::string& method, const std::string& code);

  // Devices and their queues.
  void SetDevice(const v1::Device& device);
  void SetDeviceHealthy(const std::string& device, bool healthy);
  void SetQueueDepth(const std::string& device, std::size_t depth);
  void ObserveQueueWait(const std::string& device, double seconds);
  void ObserveCompute(const std::string& device, double seconds);
  void ObserveKernelSamples(const std::string& implementation, const std::string& device,
                            const std::vector<double>& samples_seconds);

  // Benchmarks of named suites.
  void RecordResult(const std::string& suite, const v1::WorkloadResult& result);
  void RecordSummary(const std::string& suite, const v1::ImplementationSummary& summary);
  void RecordBenchmarkRun(const std::string& suite, const std::string& device,
                          const std::string& result, double unix_seconds);

  // GPU telemetry sampled from NVML.
  void SetClocks(const std::string& device, const v1::Clocks& clocks);

  void SetBuildInfo(const std::string& version, const std::string& git_revision,
                    const std::string& cuda_runtime);
  void SetReady(bool ready);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& rpc_requests_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Family<prometheus::Counter>& received_bytes_;
  prometheus::Family<prometheus::Counter>& sent_bytes_;
  prometheus::Family<prometheus::Gauge>& inflight_;
  prometheus::Family<prometheus::Gauge>& queue_depth_;
  prometheus::Family<prometheus::Gauge>& queue_capacity_;
  prometheus::Family<prometheus::Histogram>& queue_wait_;
  prometheus::Family<prometheus::Histogram>& compute_;
  prometheus::Family<prometheus::Histogram>& kernel_duration_;
  prometheus::Family<prometheus::Counter>& benchmark_runs_;
  prometheus::Family<prometheus::Gauge>& bench_latency_;
  prometheus::Family<prometheus::Gauge>& bench_bandwidth_;
  prometheus::Family<prometheus::Gauge>& bench_sol_;
  prometheus::Family<prometheus::Gauge>& bench_correct_;
  prometheus::Family<prometheus::Gauge>& suite_latency_;
  prometheus::Family<prometheus::Gauge>& suite_sol_;
  prometheus::Family<prometheus::Gauge>& last_run_;
  prometheus::Family<prometheus::Gauge>& device_info_;
  prometheus::Family<prometheus::Gauge>& device_sm_count_;
  prometheus::Family<prometheus::Gauge>& device_memory_;
  prometheus::Family<prometheus::Gauge>& device_peak_;
  prometheus::Family<prometheus::Gauge>& device_healthy_;
  prometheus::Family<prometheus::Gauge>& gpu_sm_clock_;
  prometheus::Family<prometheus::Gauge>& gpu_mem_clock_;
  prometheus::Family<prometheus::Gauge>& gpu_temperature_;
  prometheus::Family<prometheus::Gauge>& gpu_power_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_used_;
  prometheus::Family<prometheus::Gauge>& gpu_throttle_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  prometheus::Family<prometheus::Gauge>& ready_;
};

// Label value of a peak source: device_attributes, datasheet, measured_copy.
const char* PeakLabel(v1::PeakSource source);

// NVML clocks-event reasons as (bit, label) pairs, the fixed label set of
// kerneleval_gpu_throttle_active.
const std::vector<std::pair<std::uint64_t, const char*>>& ThrottleReasons();

}  // namespace kerneleval::server
