// Prometheus metrics of the service (prometheus-cpp). Names follow Prometheus conventions
// (base units, `_total` counters) and pass `promtool check metrics`.
//
// Every series of a device carries `device`, `uuid` (the GPU's; empty on a CPU) and `node`
// (SetNodeName), so that a GPU is identified across pod restarts and device renumbering.
// Benchmark results are written by the shared report schema (metrics/report_metrics.h),
// the same code the CLI's Pushgateway push uses.
//
// Label values are bounded: methods, gRPC code names, devices, suites loaded at start,
// protocols (ProtocolLabel), and implementations. Built-in implementations
// (AddBuiltinImplementations) are kept; any other implementation (a submitted kernel) is
// one of at most kMaxOtherImplementations whose series exist, the least recently used
// making room for a new one, and its series are removed once it has not run for
// kOtherImplementationTtl (ExpireSeries).
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"
#include "metrics/report_metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kerneleval::server {

class Metrics {
 public:
  // About 17 series per implementation x device; 32 submitted kernels on an 8-GPU node stay
  // below 5,000 series.
  static constexpr std::size_t kMaxOtherImplementations = 32;
  static constexpr std::chrono::hours kOtherImplementationTtl{24};

  Metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // process_* series of this process, read from /proc at each scrape.
  std::shared_ptr<prometheus::Collectable> process_collectable() const { return process_; }

  // The `node` label of every device series (the Kubernetes node, --node-name). Call
  // before devices are added.
  void SetNodeName(const std::string& node);
  // Implementations whose series are kept without bound (the backends' own).
  void AddBuiltinImplementations(const std::vector<v1::Implementation>& implementations);
  // Removes the series of non-built-in implementations unused for kOtherImplementationTtl.
  void ExpireSeries(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // RPCs.
  void RpcStarted(const std::string& method);
  void RpcFinished(const std::string& method, const std::string& code, double seconds,
                   std::size_t received_bytes, std::size_t sent_bytes);
  // A call refused before it reached a handler (authentication): counted by code only.
  void RpcRejected(const std::string& method, const std::string& code);

  // Devices and their queues. SetDevice learns the device's UUID: series written earlier
  // under another UUID (before warm-up) are removed.
  void SetDevice(const v1::Device& device);
  void SetDeviceHealthy(const std::string& device, bool healthy);
  // The device's recovery gave up (DeviceWorker::RecoverDevice): out of service, retried once
  // a minute; a restart of the server would take the node's other devices down with it.
  void SetDeviceGivenUp(const std::string& device, bool given_up);
  // A device rebuilt after a fault, a crash or a hang (its device host replaced).
  void DeviceRestarted(const std::string& device);
  void SetQueueDepth(const std::string& device, std::size_t depth);
  void ObserveQueueWait(const std::string& device, double seconds);
  void ObserveCompute(const std::string& device, double seconds);
  void ObserveKernelSamples(const std::string& implementation, const std::string& device,
                            const std::vector<double>& samples_seconds);

  // A finished benchmark of a named suite: its results (metrics/report_metrics.h) and one
  // kerneleval_benchmark_runs_total increment per device by outcome.
  void RecordReport(const v1::BenchmarkReport& report, double unix_seconds);

  // GPU telemetry sampled from NVML.
  void SetClocks(const std::string& device, const v1::Clocks& clocks);

  void SetBuildInfo(const std::string& version, const std::string& git_revision,
                    const std::string& cuda_runtime);
  void SetReady(bool ready);
  // Which layers of the compile jail hold on this kernel (submissions::CompileJailLayers),
  // set once at start where submissions are on.
  void SetCompileJailLayers(const std::vector<std::pair<std::string, bool>>& layers);

 private:
  prometheus::Labels DeviceLabelsLocked(const std::string& device) const;
  void TouchImplementationLocked(const std::string& implementation);
  void RemoveImplementationLocked(const std::string& implementation);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_;
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
  prometheus::Family<prometheus::Counter>& device_restarts_;
  prometheus::Family<prometheus::Gauge>& device_info_;
  prometheus::Family<prometheus::Gauge>& device_sm_count_;
  prometheus::Family<prometheus::Gauge>& device_memory_;
  prometheus::Family<prometheus::Gauge>& device_peak_;
  prometheus::Family<prometheus::Gauge>& device_healthy_;
  prometheus::Family<prometheus::Gauge>& device_given_up_;
  prometheus::Family<prometheus::Gauge>& gpu_sm_clock_;
  prometheus::Family<prometheus::Gauge>& gpu_mem_clock_;
  prometheus::Family<prometheus::Gauge>& gpu_temperature_;
  prometheus::Family<prometheus::Gauge>& gpu_power_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_used_;
  prometheus::Family<prometheus::Gauge>& gpu_throttle_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  prometheus::Family<prometheus::Gauge>& ready_;
  prometheus::Family<prometheus::Gauge>& compile_jail_layer_;
  metrics::ReportMetrics report_;

  // Guards the label state below and every write to a device- or implementation-labelled
  // series: a series may be removed (UUID learnt, implementation expired), and a writer
  // holding the reference Add() returned must not write to freed memory.
  mutable std::mutex mu_;
  std::string node_;
  std::map<std::string, std::string> uuids_;  // device -> GPU UUID
  std::set<std::string> builtin_;
  std::map<std::string, std::chrono::steady_clock::time_point> others_;  // last use
};

// NVML clocks-event reasons as (bit, label) pairs, the fixed label set of
// kerneleval_gpu_throttle_active.
const std::vector<std::pair<std::uint64_t, const char*>>& ThrottleReasons();

}  // namespace kerneleval::server
