// The regression gauges, one series per (suite, workload, implementation, gpu_model, device,
// protocol), set from the verdict of each new result against its baseline. device ("cuda:3")
// and protocol (ProtocolLabel: "cold", "hot_graph", ...) keep the eight GPUs of one
// server, and a cold and a hot run of one suite, from overwriting each other's verdicts:
//   kerneleval_result_baseline_ratio       candidate median / baseline median
//   kerneleval_result_baseline_confidence  1 - p (Mann-Whitney U, two-sided)
//   kerneleval_result_regression           1 on a significant slowdown or a correctness
//                                          change, else 0
#pragma once

#include <memory>
#include <string>

#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace kerneleval::server::store {

struct SeriesKey {
  std::string suite, workload, implementation, gpu_model, device, protocol;
};

class RegressionGauges {
 public:
  explicit RegressionGauges(std::shared_ptr<prometheus::Registry> registry);
  void Set(const SeriesKey& key, double ratio, double confidence, bool regression);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& ratio_;
  prometheus::Family<prometheus::Gauge>& confidence_;
  prometheus::Family<prometheus::Gauge>& regression_;
};

}  // namespace kerneleval::server::store
