#include "server/store/regression_metrics.h"

#include "prometheus/gauge.h"

namespace kerneleval::server::store {

RegressionGauges::RegressionGauges(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      ratio_(prometheus::BuildGauge()
                 .Name("kerneleval_result_baseline_ratio")
                 .Help("Median latency of the newest stored result over the median of its "
                       "baseline (the previous passing results of the series)")
                 .Register(*registry_)),
      confidence_(prometheus::BuildGauge()
                      .Name("kerneleval_result_baseline_confidence")
                      .Help("1 - p of a two-sided Mann-Whitney U test of the newest result's "
                            "samples against the baseline's")
                      .Register(*registry_)),
      regression_(prometheus::BuildGauge()
                      .Name("kerneleval_result_regression")
                      .Help("1 when the newest result is significantly slower than its "
                            "baseline or its correctness changed, else 0")
                      .Register(*registry_)) {}

void RegressionGauges::Set(const SeriesKey& key, double ratio, double confidence, bool regression) {
  const prometheus::Labels labels = {{"suite", key.suite},
                                     {"workload", key.workload},
                                     {"implementation", key.implementation},
                                     {"gpu_model", key.gpu_model},
                                     {"device", key.device},
                                     {"protocol", key.protocol}};
  ratio_.Add(labels).Set(ratio);
  confidence_.Add(labels).Set(confidence);
  regression_.Add(labels).Set(regression ? 1 : 0);
}

}  // namespace kerneleval::server::store
