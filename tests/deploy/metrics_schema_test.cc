// The metric schema: the server's /metrics and the Pushgateway push write a report through
// the same code (metrics/report_metrics.h), and the server's own series keep their label
// and cardinality promises (node and uuid on device series, bounded submitted kernels,
// restarts, process series, finer kernel buckets).
#include <prometheus/text_serializer.h>

#include <chrono>
#include <ctime>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "client/push.h"
#include "common/protocol.h"
#include "gtest/gtest.h"
#include "metrics/report_metrics.h"
#include "server/metrics/metrics.h"
#include "server/metrics/process_metrics.h"

namespace kerneleval {
namespace {

std::string Scrape(const prometheus::Collectable& c) {
  return prometheus::TextSerializer().Serialize(c.Collect());
}

// Sample lines of families whose name starts with `prefix`, sorted.
std::set<std::string> Lines(const std::string& text, const std::string& prefix) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.insert(line);
  }
  return out;
}

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

v1::Device Gpu(const std::string& name, const std::string& uuid) {
  v1::Device d;
  d.set_name(name);
  d.set_kind("cuda");
  d.set_model("NVIDIA H200");
  d.set_uuid(uuid);
  d.set_queue_capacity(64);
  d.set_healthy(true);
  return d;
}

// A scheduled-protocol report of two implementations on one GPU; `status` for the first.
v1::BenchmarkReport Report(v1::ResultStatus status) {
  v1::BenchmarkReport report;
  report.set_suite("fused_add_rmsnorm_h2048");
  report.set_complete(true);
  v1::Protocol* p = report.mutable_protocol();
  p->set_warmup(10);
  p->set_repetitions(50);
  p->set_seed(200);
  for (const char* impl : {"fused", "unfused"}) {
    v1::WorkloadResult* r = report.add_results();
    r->set_workload("b16254");
    r->set_implementation(impl);
    r->set_device("cuda:0");
    r->set_status(std::string(impl) == "fused" ? status : v1::RESULT_STATUS_PASSED);
    r->mutable_latency()->set_median_seconds(4.4e-5);
    r->set_bytes_per_second(4.5e12);
    v1::SolFigure* f = r->add_sol();
    f->set_source(v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
    f->set_sol_ratio(0.94);
    r->mutable_correctness()->set_passed(r->status() == v1::RESULT_STATUS_PASSED);
    v1::ImplementationSummary* s = report.add_summaries();
    s->set_implementation(impl);
    s->set_device("cuda:0");
    s->set_mean_latency_seconds(4.4e-5);
    s->set_geomean_sol_ratio(0.94);
    s->set_passed(r->status() == v1::RESULT_STATUS_PASSED ? 1 : 0);
    s->set_failed(r->status() == v1::RESULT_STATUS_PASSED ? 0 : 1);
  }
  *report.add_environments()->mutable_device() = Gpu("cuda:0", "GPU-b711");
  return report;
}

TEST(MetricsSchema, ServerAndPushWriteTheSameSeries) {
  server::Metrics metrics;
  metrics.SetNodeName("gpu-node-1");
  metrics.SetDevice(Gpu("cuda:0", "GPU-b711"));
  const v1::BenchmarkReport report = Report(v1::RESULT_STATUS_PASSED);
  metrics.RecordReport(report, 1700000000);
  const std::string server = Scrape(*metrics.registry());
  const std::string push = client::RenderPushMetrics(report, 1700000000, "gpu-node-1");
  const std::set<std::string> pushed = Lines(push, "kerneleval_benchmark_");
  // 2 implementations x (latency, bandwidth, sol, correct, suite latency, suite sol), then
  // runtime errors and the last run of the device.
  ASSERT_EQ(pushed.size(), 14u) << push;
  std::set<std::string> served = Lines(server, "kerneleval_benchmark_");
  for (auto it = served.begin(); it != served.end();) {
    it = it->rfind("kerneleval_benchmark_runs_total", 0) == 0 ? served.erase(it) : std::next(it);
  }
  EXPECT_EQ(served, pushed) << "server:\n" << server << "\npush:\n" << push;
  EXPECT_NE(push.find("protocol=\"cold\""), std::string::npos);
  EXPECT_NE(push.find("kerneleval_benchmark_suite_sol_ratio{device=\"cuda:0\","
                      "implementation=\"fused\",model=\"NVIDIA H200\",node=\"gpu-node-1\","
                      "peak=\"device_attributes\",protocol=\"cold\""),
            std::string::npos)
      << push;
}

TEST(MetricsSchema, ARuntimeErrorRemovesTheVerdictOnBothSides) {
  server::Metrics metrics;
  metrics.SetDevice(Gpu("cuda:0", "GPU-b711"));
  metrics.RecordReport(Report(v1::RESULT_STATUS_PASSED), 1);
  ASSERT_EQ(Count(Scrape(*metrics.registry()), "kerneleval_benchmark_correct{"), 2u);
  const v1::BenchmarkReport errored = Report(v1::RESULT_STATUS_RUNTIME_ERROR);
  metrics.RecordReport(errored, 2);
  const std::string server = Scrape(*metrics.registry());
  const std::string push = client::RenderPushMetrics(errored, 2, "");
  for (const std::string& text : {server, push}) {
    EXPECT_EQ(Count(text, "kerneleval_benchmark_correct{"), 1u) << text;
    EXPECT_EQ(Count(text, "implementation=\"fused\""), 0u) << text;
    EXPECT_NE(text.find("kerneleval_benchmark_runtime_errors{device=\"cuda:0\""),
              std::string::npos);
    EXPECT_TRUE(std::regex_search(text, std::regex("kerneleval_benchmark_runtime_errors\\{[^}]*"
                                                   "\\} 1\\n")))
        << text;
  }
  EXPECT_TRUE(std::regex_search(server, std::regex("kerneleval_benchmark_runs_total\\{[^}]*"
                                                   "result=\"error\"[^}]*\\} 1\\n")))
      << server;
}

TEST(MetricsSchema, AnAdHocProtocolDoesNotOverwriteTheScheduledSeries) {
  server::Metrics metrics;
  metrics.RecordReport(Report(v1::RESULT_STATUS_PASSED), 1);
  v1::BenchmarkReport quick = Report(v1::RESULT_STATUS_PASSED);
  quick.mutable_protocol()->set_repetitions(3);
  quick.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
  metrics.RecordReport(quick, 2);
  const std::string text = Scrape(*metrics.registry());
  EXPECT_TRUE(std::regex_search(
      text, std::regex("last_run_timestamp_seconds\\{[^}]*protocol=\"cold\"[^}]*\\} 1\\n")))
      << text;
  EXPECT_TRUE(std::regex_search(
      text, std::regex("last_run_timestamp_seconds\\{[^}]*protocol=\"hot_custom\"[^}]*\\} 2\\n")))
      << text;
  EXPECT_EQ(ProtocolLabel(quick.protocol()), "hot_custom");
  v1::Protocol graph = Report(v1::RESULT_STATUS_PASSED).protocol();
  graph.set_cuda_graph(true);
  graph.set_rotate_inputs(true);
  EXPECT_EQ(ProtocolLabel(graph), "cold_graph_rotate");
}

TEST(MetricsSchema, DeviceSeriesCarryNodeAndUuidAndMoveWhenTheUuidIsLearnt) {
  server::Metrics metrics;
  metrics.SetNodeName("gpu-node-1");
  metrics.SetQueueDepth("cuda:0", 3);  // before warm-up: the UUID is not known yet
  metrics.SetDeviceHealthy("cuda:0", true);
  metrics.SetDevice(Gpu("cuda:0", "GPU-b711"));
  metrics.SetQueueDepth("cuda:0", 1);
  v1::Clocks clocks;
  clocks.set_sm_mhz(1980);
  metrics.SetClocks("cuda:0", clocks);
  metrics.ObserveQueueWait("cuda:0", 1e-3);
  const std::string text = Scrape(*metrics.registry());
  EXPECT_EQ(Count(text, "kerneleval_queue_depth{"), 1u) << text;
  EXPECT_EQ(Count(text, "uuid=\"\""), 0u) << text;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line[0] == '#' || line.find("device=\"cuda:0\"") == std::string::npos) continue;
    EXPECT_NE(line.find("node=\"gpu-node-1\""), std::string::npos) << line;
    EXPECT_NE(line.find("uuid=\"GPU-b711\""), std::string::npos) << line;
  }
}

TEST(MetricsSchema, DeviceHostRestartsAreCountedPerGpu) {
  server::Metrics metrics;
  metrics.SetDevice(Gpu("cuda:0", "GPU-b711"));
  metrics.SetDevice(Gpu("cuda:1", "GPU-c822"));
  metrics.DeviceRestarted("cuda:1");
  metrics.DeviceRestarted("cuda:1");
  const std::string text = Scrape(*metrics.registry());
  EXPECT_TRUE(std::regex_search(text, std::regex("kerneleval_device_host_restarts_total\\{device="
                                                 "\"cuda:0\"[^}]*\\} 0\\n")))
      << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("kerneleval_device_host_restarts_total\\{device="
                                                 "\"cuda:1\"[^}]*uuid=\"GPU-c822\"\\} 2\\n")))
      << text;
}

TEST(MetricsSchema, SubmittedImplementationsAreBoundedAndExpire) {
  server::Metrics metrics;
  v1::Implementation builtin;
  builtin.set_name("fused");
  metrics.AddBuiltinImplementations({builtin});
  metrics.ObserveKernelSamples("fused", "cuda:0", {1e-5});
  const std::size_t cap = server::Metrics::kMaxOtherImplementations;
  for (std::size_t i = 0; i < cap + 8; ++i) {
    metrics.ObserveKernelSamples("submitted_" + std::to_string(i), "cuda:0", {1e-5});
  }
  v1::BenchmarkReport report = Report(v1::RESULT_STATUS_PASSED);
  report.mutable_results(1)->set_implementation("submitted_last");
  report.mutable_summaries(1)->set_implementation("submitted_last");
  metrics.RecordReport(report, 1);
  std::string text = Scrape(*metrics.registry());
  std::set<std::string> names;
  const std::regex impl("implementation=\"(submitted_[a-z0-9]+)\"");
  for (std::sregex_iterator it(text.begin(), text.end(), impl), end; it != end; ++it) {
    names.insert((*it)[1]);
  }
  EXPECT_EQ(names.size(), cap) << text.size();
  EXPECT_EQ(names.count("submitted_0"), 0u);  // the least recently used made room
  EXPECT_EQ(names.count("submitted_last"), 1u);
  EXPECT_NE(text.find("implementation=\"fused\""), std::string::npos);

  metrics.ExpireSeries(std::chrono::steady_clock::now() + std::chrono::hours(1));
  EXPECT_NE(Scrape(*metrics.registry()).find("submitted_last"), std::string::npos);
  metrics.ExpireSeries(std::chrono::steady_clock::now() + server::Metrics::kOtherImplementationTtl);
  text = Scrape(*metrics.registry());
  EXPECT_EQ(text.find("submitted_"), std::string::npos) << text;
  EXPECT_NE(text.find("kerneleval_kernel_duration_seconds_count{device=\"cuda:0\","
                      "implementation=\"fused\""),
            std::string::npos)
      << text;
}

TEST(MetricsSchema, KernelBucketsResolveTenPercentSteps) {
  server::Metrics metrics;
  metrics.ObserveKernelSamples("fused", "cuda:0", {1.2e-6});
  const std::string text = Scrape(*metrics.registry());
  std::set<double> bounds;
  const std::regex le("kerneleval_kernel_duration_seconds_bucket\\{[^}]*le=\"([0-9.e+-]+)\"");
  for (std::sregex_iterator it(text.begin(), text.end(), le), end; it != end; ++it) {
    bounds.insert(std::stod((*it)[1]));
  }
  double previous = 0;
  for (double b : bounds) {
    if (b > 5e-7 && b <= 1e-3) EXPECT_LE(b / previous, 1.3) << b;
    previous = b;
  }
  EXPECT_EQ(*bounds.begin(), 5e-7);
  EXPECT_GE(bounds.size(), 35u);
}

TEST(MetricsSchema, ProcessSeriesComeFromProc) {
  const std::string text = Scrape(server::ProcessCollector());
  const double now = static_cast<double>(std::time(nullptr));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("process_start_time_seconds ([0-9.e+]+)")))
      << text;
  EXPECT_LE(std::stod(m[1]), now + 1);
  EXPECT_GT(std::stod(m[1]), now - 3600);  // this test process started moments ago
  ASSERT_TRUE(std::regex_search(text, m, std::regex("process_resident_memory_bytes ([0-9.e+]+)")));
  EXPECT_GT(std::stod(m[1]), 1 << 20);
  EXPECT_NE(text.find("process_open_fds "), std::string::npos);
  EXPECT_NE(text.find("process_cpu_seconds_total "), std::string::npos);
}

}  // namespace
}  // namespace kerneleval
