// SOL above 100 % on a real CPU server: a hot workload whose working set fits in the
// last-level cache beats the DRAM copy peak the server measured at start (up to 251 % was
// seen in Run). Every such figure must carry the flag and its reason, and every output format
// must print the reason. Real server on loopback, real client, the CLI's own formatters.
#include <string>

#include "client/report_format.h"
#include "client/results_client.h"
#include "client/results_command.h"
#include "client/tensors.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

// fp32, hidden 4096, batch 32: 1.52 MiB moved per call, in cache on any server CPU, and long
// enough (tens of microseconds) that the timer's overhead does not hide the cache's speed.
v1::SuiteDefinition InCacheSuite() {
  v1::SuiteDefinition s;
  s.set_name("sol_in_cache");
  s.set_dtype(v1::DTYPE_FP32);
  s.set_mode(v1::MODE_OUTPUT);
  v1::Axis* batch = s.add_axes();
  batch->set_name("batch_size");
  v1::Axis* hidden = s.add_axes();
  hidden->set_name("hidden_size");
  hidden->set_is_const(true);
  hidden->set_value(4096);
  v1::Workload* w = s.add_workloads();
  w->set_name("batch_size=32");
  (*w->mutable_axes())["batch_size"] = 32;
  return s;
}

// The sentence a figure above the peak must carry for this device and byte count (both at
// least 1 MiB here, which the server prints with three significant digits).
std::string ExpectedReason(const v1::Device& cpu, std::uint64_t bytes) {
  auto mib = [](double b) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3g", b / (1 << 20));
    return std::string(text);
  };
  return "working set " + mib(static_cast<double>(bytes)) + " MiB fits in the " +
         mib(static_cast<double>(cpu.l2_cache_bytes())) +
         " MiB last-level cache: SOL is measured against the DRAM peak";
}

void ExpectFlagMatchesRatio(const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures,
                            const std::string& reason) {
  ASSERT_FALSE(figures.empty());
  for (const v1::SolFigure& f : figures) {
    EXPECT_EQ(f.above_peak(), f.sol_ratio() > 1) << f.ShortDebugString();
    EXPECT_EQ(f.above_peak_reason(), f.above_peak() ? reason : "") << f.ShortDebugString();
  }
}

class SolAbovePeak : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    ASSERT_NE(server_.server, nullptr);
    v1::ListDevicesResponse devices;
    ASSERT_TRUE(server_.client->ListDevices(&devices).ok());
    ASSERT_EQ(devices.devices(0).kind(), "cpu");
    cpu_ = devices.devices(0);
    // The reason needs the cache; a CPU whose cache size cannot be read has none to name.
    if (cpu_.l2_cache_bytes() < (2u << 20)) GTEST_SKIP() << "last-level cache unknown or small";
  }

  // A hot benchmark of the in-cache suite; up to three tries, as a host busy with builds can
  // slow one run below the DRAM peak. Returns the first report whose result is above it.
  v1::BenchmarkReport HotReportAbovePeak() {
    v1::BenchmarkReport report;
    for (int attempt = 0; attempt < 3; ++attempt) {
      v1::BenchmarkRequest request;
      *request.mutable_custom_suite() = InCacheSuite();
      request.add_implementations("cpu_fused");
      request.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
      request.mutable_protocol()->set_warmup(20);
      request.mutable_protocol()->set_repetitions(200);
      const grpc::Status s = server_.client->Benchmark(request, [&](const v1::BenchmarkEvent& e) {
        if (e.has_report()) report = e.report();
      });
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (report.results_size() == 1 && report.results(0).sol_size() > 0 &&
          report.results(0).sol(0).above_peak()) {
        break;
      }
    }
    return report;
  }

  TestServer server_;
  v1::Device cpu_;
};

TEST_F(SolAbovePeak, RunFlagsAFigureAboveThePeakWithTheCacheAsItsReason) {
  v1::RunRequest request;
  *request.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_FP32, {32, 4096}, 1);
  *request.mutable_residual() = client::RandomTensor(v1::DTYPE_FP32, {32, 4096}, 2);
  *request.mutable_weight() = client::RandomTensor(v1::DTYPE_FP32, {4096}, 3);
  request.set_warmup(20);
  request.set_repetitions(200);
  request.set_omit_outputs(true);
  v1::RunResponse response;
  bool above = false;
  for (int attempt = 0; attempt < 3 && !above; ++attempt) {
    ASSERT_TRUE(server_.client->Run(request, &response).ok());
    ExpectFlagMatchesRatio(response.sol(), ExpectedReason(cpu_, response.bytes_moved()));
    above = response.sol(0).above_peak();
  }
  ASSERT_TRUE(above) << "SOL stayed at or below 100 % in cache: " << response.ShortDebugString();
  EXPECT_NE(client::FormatRunResponse(response).find(response.sol(0).above_peak_reason()),
            std::string::npos)
      << client::FormatRunResponse(response);
}

TEST_F(SolAbovePeak, EveryFormatAndHistoryPrintTheReason) {
  const v1::BenchmarkReport report = HotReportAbovePeak();
  ASSERT_EQ(report.results_size(), 1);
  const v1::WorkloadResult& r = report.results(0);
  ExpectFlagMatchesRatio(r.sol(), ExpectedReason(cpu_, r.bytes_moved()));
  ASSERT_TRUE(r.sol(0).above_peak())
      << "SOL stayed at or below 100 % in cache: " << r.ShortDebugString();
  const std::string reason = r.sol(0).above_peak_reason();
  for (client::ReportFormat format :
       {client::ReportFormat::kTable, client::ReportFormat::kJson, client::ReportFormat::kJsonl,
        client::ReportFormat::kCsv, client::ReportFormat::kHtml}) {
    const absl::StatusOr<std::string> text = client::FormatReport(report, format);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_NE(text->find(reason), std::string::npos) << static_cast<int>(format) << "\n" << *text;
  }
  // The HTML footnote names the peak the summary used: the CPU's measured copy, not the
  // device-attribute peak a CPU does not have.
  const std::string html = client::FormatReportHtml(report);
  EXPECT_NE(html.find("SOL % against the peak bandwidth cpu: "), std::string::npos) << html;
  EXPECT_NE(html.find("(measured_copy)."), std::string::npos) << html;
  EXPECT_EQ(html.find("against the device-attribute peak"), std::string::npos);

  // The stored result keeps the flag: history prints it.
  client::ResultsClient results(
      grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()), {});
  v1::HistoryRequest request;
  request.mutable_filter()->set_run_id(report.run_id());
  v1::HistoryResponse history;
  for (int i = 0; i < 100 && history.results_size() == 0; ++i) {
    ASSERT_TRUE(results.History(request, &history).ok());
    if (history.results_size() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(history.results_size(), 1);
  EXPECT_TRUE(history.results(0).result().sol(0).above_peak());
  const std::string table = client::cli::FormatHistory(history);
  EXPECT_NE(table.find(history.results(0).id() + ": SOL above 100 %: " + reason), std::string::npos)
      << table;
}

}  // namespace
}  // namespace kerneleval::testing
