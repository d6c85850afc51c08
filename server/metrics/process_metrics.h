// The standard process_* series of this process (the names the Prometheus client libraries
// of Go, Java and Python export, so that dashboards and alerts written for them apply):
//   process_start_time_seconds      Unix time the process started
//   process_resident_memory_bytes   resident set size
//   process_virtual_memory_bytes    virtual memory size
//   process_cpu_seconds_total       user + system CPU time
//   process_open_fds                open file descriptors
// Read from /proc at each scrape; a value /proc does not give (another OS) is left out.
//
// Thread-safe: Collect() only reads /proc.
#pragma once

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace kerneleval::server {

class ProcessCollector : public prometheus::Collectable {
 public:
  ProcessCollector();
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  double start_time_seconds_ = 0;  // 0: unknown
};

}  // namespace kerneleval::server
