#include "server/metrics/metrics.h"

#include "common/conversions.h"
#include "common/protocol.h"
#include "server/metrics/process_metrics.h"

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

// Kernel samples: ten buckets per decade (the E10 series, steps of ~26%) from 500 ns to 1 ms,
// where this operation lives (h2048 suite: ~1 us at B=1 to ~50 us at B=16254 on an H200),
// so that a quantile interpolated inside a bucket is within ~13% rather than the ~50% of a
// 1-2-5 series; coarse above. prometheus-cpp 1.0 has no native histograms.
const Histogram::BucketBoundaries& KernelBuckets() {
  static const Histogram::BucketBoundaries b = [] {
    static const double kE10[] = {1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8};
    Histogram::BucketBoundaries out;
    for (double decade : {1e-7, 1e-6, 1e-5, 1e-4}) {
      for (double m : kE10) {
        if (m * decade >= 5e-7) out.push_back(m * decade);
      }
    }
    for (double upper : {1e-3, 2e-3, 5e-3, 1e-2, 0.1, 1.0}) out.push_back(upper);
    return out;
  }();
  return b;
}

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r, const char* name,
                                                       const char* help) {
  return BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const char* name,
                                                   const char* help) {
  return BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Family<Histogram>& HistogramFamily(prometheus::Registry& r, const char* name,
                                               const char* help) {
  return BuildHistogram().Name(name).Help(help).Register(r);
}

template <typename T>
void RemoveIfPresent(prometheus::Family<T>& family, const prometheus::Labels& labels) {
  if (family.Has(labels)) family.Remove(&family.Add(labels));
}

prometheus::Labels With(prometheus::Labels labels, const char* name, const std::string& value) {
  labels[name] = value;
  return labels;
}

}  // namespace

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
      process_(std::make_shared<ProcessCollector>()),
      rpc_requests_(CounterFamily(*registry_, "kerneleval_rpc_requests_total",
                                  "RPCs handled, by method and gRPC status code")),
      rpc_duration_(HistogramFamily(*registry_, "kerneleval_rpc_duration_seconds",
                                    "Time from receiving an RPC to its final status")),
      received_bytes_(CounterFamily(*registry_, "kerneleval_received_bytes_total",
                                    "Serialized request bytes received")),
      sent_bytes_(CounterFamily(*registry_, "kerneleval_sent_bytes_total",
                                "Serialized response bytes sent")),
      inflight_(GaugeFamily(*registry_, "kerneleval_inflight_requests",
                            "RPCs received and not yet finished")),
      queue_depth_(GaugeFamily(*registry_, "kerneleval_queue_depth", "Jobs waiting for a device")),
      queue_capacity_(GaugeFamily(*registry_, "kerneleval_queue_capacity",
                                  "Jobs a device queue accepts before RESOURCE_EXHAUSTED")),
      queue_wait_(HistogramFamily(*registry_, "kerneleval_queue_wait_seconds",
                                  "Time a job waited for its device")),
      compute_(HistogramFamily(*registry_, "kerneleval_compute_seconds",
                               "Time a job held its device (transfers, calls, checks)")),
      kernel_duration_(
          HistogramFamily(*registry_, "kerneleval_kernel_duration_seconds",
                          "Timed calls of an implementation, one observation per sample")),
      benchmark_runs_(CounterFamily(*registry_, "kerneleval_benchmark_runs_total",
                                    "Benchmark runs of named suites by outcome")),
      device_restarts_(CounterFamily(*registry_, "kerneleval_device_host_restarts_total",
                                     "Devices rebuilt after a fault, a crash or a hang (with "
                                     "process isolation: device host processes replaced)")),
      device_info_(GaugeFamily(*registry_, "kerneleval_device_info", "Devices served, value 1")),
      device_sm_count_(GaugeFamily(*registry_, "kerneleval_device_multiprocessors",
                                   "Streaming multiprocessors of a GPU")),
      device_memory_(
          GaugeFamily(*registry_, "kerneleval_device_memory_bytes", "Memory of a device")),
      device_peak_(GaugeFamily(*registry_, "kerneleval_device_peak_bandwidth_bytes_per_second",
                               "Memory bandwidth peaks SOL is measured against, by source")),
      device_healthy_(GaugeFamily(*registry_, "kerneleval_device_healthy",
                                  "1 while a device serves, 0 after a fault until it recovers")),
      device_given_up_(GaugeFamily(*registry_, "kerneleval_device_given_up",
                                   "1 once five rebuilds of a device after a fault failed: it "
                                   "is out of service, retried once a minute; 0 once rebuilt")),
      gpu_sm_clock_(
          GaugeFamily(*registry_, "kerneleval_gpu_sm_clock_hertz", "Current SM clock (NVML)")),
      gpu_mem_clock_(GaugeFamily(*registry_, "kerneleval_gpu_memory_clock_hertz",
                                 "Current memory clock (NVML)")),
      gpu_temperature_(
          GaugeFamily(*registry_, "kerneleval_gpu_temperature_celsius", "GPU temperature (NVML)")),
      gpu_power_(GaugeFamily(*registry_, "kerneleval_gpu_power_watts", "GPU power draw (NVML)")),
      gpu_memory_used_(
          GaugeFamily(*registry_, "kerneleval_gpu_memory_used_bytes", "GPU memory in use (NVML)")),
      gpu_throttle_(GaugeFamily(*registry_, "kerneleval_gpu_throttle_active",
                                "1 while an NVML clocks-event (throttle) reason is active")),
      build_info_(GaugeFamily(*registry_, "kerneleval_build_info", "Build of the server, value 1")),
      ready_(GaugeFamily(*registry_, "kerneleval_ready",
                         "1 while the readiness health status is SERVING")),
      compile_jail_layer_(GaugeFamily(*registry_, "kerneleval_compile_jail_layer",
                                      "1 where a layer of the compile jail holds on this "
                                      "kernel (landlock, seccomp_open_ban, seccomp_syscalls, "
                                      "rlimits), 0 where it is missing")),
      report_(*registry_) {}

void Metrics::SetNodeName(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  node_ = node;
}

void Metrics::AddBuiltinImplementations(const std::vector<v1::Implementation>& implementations) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::Implementation& i : implementations) {
    builtin_.insert(i.name());
    others_.erase(i.name());
  }
}

prometheus::Labels Metrics::DeviceLabelsLocked(const std::string& device) const {
  const auto it = uuids_.find(device);
  return {{"device", device}, {"uuid", it == uuids_.end() ? "" : it->second}, {"node", node_}};
}

void Metrics::TouchImplementationLocked(const std::string& implementation) {
  if (builtin_.count(implementation) != 0) return;
  others_[implementation] = std::chrono::steady_clock::now();
  while (others_.size() > kMaxOtherImplementations) {
    auto oldest = others_.begin();
    for (auto it = others_.begin(); it != others_.end(); ++it) {
      if (it->second < oldest->second) oldest = it;
    }
    const std::string evicted = oldest->first;
    others_.erase(oldest);
    RemoveImplementationLocked(evicted);
  }
}

void Metrics::RemoveImplementationLocked(const std::string& implementation) {
  report_.RemoveImplementation(implementation);
  metrics::RemoveSeriesWhere(kernel_duration_, "implementation", implementation, "", "",
                             [this](const prometheus::Labels& l) -> prometheus::Histogram& {
                               return kernel_duration_.Add(l, KernelBuckets());
                             });
}

void Metrics::ExpireSeries(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = others_.begin(); it != others_.end();) {
    if (now - it->second >= kOtherImplementationTtl) {
      RemoveImplementationLocked(it->first);
      it = others_.erase(it);
    } else {
      ++it;
    }
  }
}

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
  std::lock_guard<std::mutex> lock(mu_);
  if (uuids_[d.name()] != d.uuid()) {
    uuids_[d.name()] = d.uuid();
    // Series written before the UUID was known would otherwise stay beside the new ones.
    auto drop = [&](auto& family) {
      metrics::RemoveSeriesWhere(family, "device", d.name(), "uuid", d.uuid());
    };
    for (auto* f :
         {&queue_depth_, &queue_capacity_, &device_info_, &device_sm_count_, &device_memory_,
          &device_peak_, &device_healthy_, &device_given_up_, &gpu_sm_clock_, &gpu_mem_clock_,
          &gpu_temperature_, &gpu_power_, &gpu_memory_used_, &gpu_throttle_}) {
      drop(*f);
    }
    for (auto* f : {&benchmark_runs_, &device_restarts_}) drop(*f);
    for (auto* f : {&queue_wait_, &compute_}) {
      metrics::RemoveSeriesWhere(
          *f, "device", d.name(), "uuid", d.uuid(),
          [f](const prometheus::Labels& l) -> Histogram& { return f->Add(l, RequestBuckets()); });
    }
    metrics::RemoveSeriesWhere(kernel_duration_, "device", d.name(), "uuid", d.uuid(),
                               [this](const prometheus::Labels& l) -> Histogram& {
                                 return kernel_duration_.Add(l, KernelBuckets());
                               });
    report_.RemoveDeviceUuidOtherThan(d.name(), d.uuid());
  }
  const prometheus::Labels labels = DeviceLabelsLocked(d.name());
  prometheus::Labels info = labels;
  info["kind"] = d.kind();
  info["model"] = d.model();
  info["compute_capability"] = d.compute_capability();
  device_info_.Add(info).Set(1);
  if (d.sm_count() > 0) device_sm_count_.Add(labels).Set(d.sm_count());
  device_memory_.Add(labels).Set(static_cast<double>(d.memory_bytes()));
  const std::pair<v1::PeakSource, double> peaks[] = {
      {v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, d.peak_bytes_per_second()},
      {v1::PEAK_SOURCE_DATASHEET, d.datasheet_bytes_per_second()},
      {v1::PEAK_SOURCE_MEASURED_COPY, d.measured_copy_bytes_per_second()}};
  for (const auto& [source, value] : peaks) {
    if (value > 0) device_peak_.Add(With(labels, "source", PeakSourceShortName(source))).Set(value);
  }
  device_healthy_.Add(labels).Set(d.healthy() ? 1 : 0);
  device_given_up_.Add(labels);  // 0 from the first sight of a device
  queue_capacity_.Add(labels).Set(d.queue_capacity());
  queue_depth_.Add(labels);
  // From the first sight of a device, so that increase() sees its first restart.
  device_restarts_.Add(labels);
}

void Metrics::SetDeviceHealthy(const std::string& device, bool healthy) {
  std::lock_guard<std::mutex> lock(mu_);
  device_healthy_.Add(DeviceLabelsLocked(device)).Set(healthy ? 1 : 0);
}

void Metrics::SetDeviceGivenUp(const std::string& device, bool given_up) {
  std::lock_guard<std::mutex> lock(mu_);
  device_given_up_.Add(DeviceLabelsLocked(device)).Set(given_up ? 1 : 0);
}

void Metrics::DeviceRestarted(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  device_restarts_.Add(DeviceLabelsLocked(device)).Increment();
}

void Metrics::SetQueueDepth(const std::string& device, std::size_t depth) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_depth_.Add(DeviceLabelsLocked(device)).Set(static_cast<double>(depth));
}

void Metrics::ObserveQueueWait(const std::string& device, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_wait_.Add(DeviceLabelsLocked(device), RequestBuckets()).Observe(seconds);
}

void Metrics::ObserveCompute(const std::string& device, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  compute_.Add(DeviceLabelsLocked(device), RequestBuckets()).Observe(seconds);
}

void Metrics::ObserveKernelSamples(const std::string& implementation, const std::string& device,
                                   const std::vector<double>& samples_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  TouchImplementationLocked(implementation);
  auto& h = kernel_duration_.Add(With(DeviceLabelsLocked(device), "implementation", implementation),
                                 KernelBuckets());
  for (double s : samples_seconds) h.Observe(s);
}

void Metrics::RecordReport(const v1::BenchmarkReport& report, double unix_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::ImplementationSummary& s : report.summaries()) {
    TouchImplementationLocked(s.implementation());
  }
  report_.Record(report, node_, unix_seconds);
  const std::string suite = metrics::ReportSuite(report);
  const std::string protocol = ProtocolLabel(report.protocol());
  for (const v1::Environment& env : report.environments()) {
    prometheus::Labels labels = DeviceLabelsLocked(env.device().name());
    labels["suite"] = suite;
    labels["protocol"] = protocol;
    // Every outcome's series exists from a suite's first run on, at 0 until it happens, so
    // that increase() sees the first increment of an outcome (a series that appears with
    // value 1 has no earlier sample to increase from).
    for (const char* outcome : {"complete", "incomplete", "error"}) {
      benchmark_runs_.Add(With(labels, "result", outcome));
    }
    benchmark_runs_.Add(With(labels, "result", metrics::DeviceOutcome(report, env.device().name())))
        .Increment();
  }
}

void Metrics::SetClocks(const std::string& device, const v1::Clocks& c) {
  std::lock_guard<std::mutex> lock(mu_);
  const prometheus::Labels labels = DeviceLabelsLocked(device);
  gpu_sm_clock_.Add(labels).Set(c.sm_mhz() * 1e6);
  gpu_mem_clock_.Add(labels).Set(c.memory_mhz() * 1e6);
  gpu_temperature_.Add(labels).Set(c.temperature_c());
  gpu_power_.Add(labels).Set(c.power_watts());
  gpu_memory_used_.Add(labels).Set(static_cast<double>(c.memory_used_bytes()));
  for (const auto& [bit, label] : ThrottleReasons()) {
    gpu_throttle_.Add(With(labels, "reason", label)).Set((c.throttle_reasons() & bit) != 0 ? 1 : 0);
  }
}

void Metrics::SetBuildInfo(const std::string& version, const std::string& git_revision,
                           const std::string& cuda_runtime) {
  build_info_
      .Add({{"version", version}, {"git_revision", git_revision}, {"cuda_runtime", cuda_runtime}})
      .Set(1);
}

void Metrics::SetReady(bool ready) { ready_.Add({}).Set(ready ? 1 : 0); }

void Metrics::SetCompileJailLayers(const std::vector<std::pair<std::string, bool>>& layers) {
  for (const auto& [layer, holds] : layers) {
    compile_jail_layer_.Add({{"layer", layer}}).Set(holds ? 1 : 0);
  }
}

}  // namespace kerneleval::server
