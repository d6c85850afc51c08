// The service end to end on the CPU backend: a real server on a loopback port, called
// through the client library.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>

#include "client/tensors.h"
#include "kerneleval/kernels/half_types.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using v1::RunRequest;
using v1::RunResponse;

RunRequest MakeRequest(v1::DType dtype, v1::Mode mode, std::int64_t batch, std::int64_t hidden,
                       std::uint64_t seed = 1) {
  RunRequest r;
  *r.mutable_hidden_states() = client::RandomTensor(dtype, {batch, hidden}, seed);
  *r.mutable_residual() = client::RandomTensor(dtype, {batch, hidden}, seed + 1);
  *r.mutable_weight() = client::RandomTensor(dtype, {hidden}, seed + 2);
  r.set_mode(mode);
  return r;
}

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(StartServer()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  client::KernelEvalClient& client() { return *server_->client; }
  static TestServer* server_;
};
TestServer* ServiceTest::server_ = nullptr;

TEST_F(ServiceTest, RunRoundTripMatchesTheFp64Reference) {
  for (v1::DType dtype : {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32}) {
    for (v1::Mode mode : {v1::MODE_OUTPUT, v1::MODE_OUTPUT_AND_RESIDUAL, v1::MODE_IN_PLACE}) {
      SCOPED_TRACE(v1::DType_Name(dtype) + " " + v1::Mode_Name(mode));
      const RunRequest req = MakeRequest(dtype, mode, 3, 111, 7);
      RunResponse resp;
      const grpc::Status s = client().Run(req, &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(CompareWithReference(req, resp), "");
      if (mode == v1::MODE_OUTPUT) EXPECT_FALSE(resp.has_residual_out());
      EXPECT_EQ(resp.device(), "cpu");
      EXPECT_EQ(resp.implementation(), "cpu_fused");
    }
  }
}

TEST_F(ServiceTest, RunReportsTimingBandwidthSolAndCorrectness) {
  RunRequest req = MakeRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 64, 2048);
  req.set_check_correctness(true);
  req.set_repetitions(5);
  req.set_warmup(2);
  RunResponse resp;
  ASSERT_TRUE(client().Run(req, &resp).ok());
  EXPECT_EQ(resp.timer(), v1::TIMER_HOST_CLOCK);
  EXPECT_EQ(resp.latency().samples(), 5u);
  EXPECT_GT(resp.latency().median_seconds(), 0);
  EXPECT_LE(resp.latency().min_seconds(), resp.latency().median_seconds());
  EXPECT_EQ(resp.bytes_moved(), 2u * (3 * 64 * 2048 + 2048));
  EXPECT_NEAR(resp.bytes_per_second(), resp.bytes_moved() / resp.latency().median_seconds(),
              1e-6 * resp.bytes_per_second());
  ASSERT_GE(resp.sol_size(), 1);
  EXPECT_EQ(resp.sol(0).source(), v1::PEAK_SOURCE_MEASURED_COPY);
  EXPECT_GT(resp.sol(0).sol_ratio(), 0);
  EXPECT_TRUE(resp.correctness().checked());
  EXPECT_TRUE(resp.correctness().passed());
  EXPECT_LT(resp.correctness().max_abs_error(), 0.05);
}

TEST_F(ServiceTest, RunWithOmittedOutputsStillTimes) {
  RunRequest req = MakeRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT, 4, 64);
  req.set_omit_outputs(true);
  RunResponse resp;
  ASSERT_TRUE(client().Run(req, &resp).ok());
  EXPECT_FALSE(resp.has_output());
  EXPECT_EQ(resp.latency().samples(), 1u);
}

// A non-finite input is reported as such, with the input row that held it: an Inf in the
// residual must not read as a NaN output only.
TEST_F(ServiceTest, InfInAResidualRowIsReportedWithItsRow) {
  RunRequest req = MakeRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 4, 16, 21);
  req.set_check_correctness(true);
  StoreFromFloat(DType::kBF16, req.mutable_residual()->mutable_data()->data(), 2 * 16 + 5,
                 INFINITY);
  RunResponse resp;
  const grpc::Status s = client().Run(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::Correctness& c = resp.correctness();
  EXPECT_TRUE(c.checked());
  EXPECT_FALSE(c.passed());
  EXPECT_TRUE(c.has_inf()) << c.ShortDebugString();
  EXPECT_NE(c.detail().find("residual[2, "), std::string::npos) << c.detail();
  EXPECT_NE(c.detail().find("(row 2)"), std::string::npos) << c.detail();
}

TEST_F(ServiceTest, NanInAHiddenStatesRowIsReportedWithItsRow) {
  RunRequest req = MakeRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT_AND_RESIDUAL, 3, 9, 22);
  req.set_check_correctness(true);
  StoreFromFloat(DType::kFP32, req.mutable_hidden_states()->mutable_data()->data(), 4, NAN);
  RunResponse resp;
  const grpc::Status s = client().Run(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::Correctness& c = resp.correctness();
  EXPECT_FALSE(c.passed());
  EXPECT_TRUE(c.has_nan()) << c.ShortDebugString();
  EXPECT_NE(c.detail().find("hidden_states[0, "), std::string::npos) << c.detail();
  EXPECT_NE(c.detail().find("(row 0)"), std::string::npos) << c.detail();
}

// Run and Benchmark are one evaluation: the same shape on the same device is measured
// against the same peaks.
TEST_F(ServiceTest, RunAndBenchmarkReportTheSamePeakSources) {
  RunRequest run = MakeRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 64, 2048, 23);
  run.set_device("cpu");
  run.set_implementation("cpu_fused");
  run.set_repetitions(3);
  RunResponse resp;
  const grpc::Status rs = client().Run(run, &resp);
  ASSERT_TRUE(rs.ok()) << rs.error_message();

  v1::BenchmarkRequest bench;
  *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {64}, 2048);
  bench.set_device("cpu");
  bench.add_implementations("cpu_fused");
  bench.mutable_protocol()->set_warmup(1);
  bench.mutable_protocol()->set_repetitions(3);
  v1::BenchmarkReport report;
  const grpc::Status bs = client().Benchmark(bench, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  ASSERT_TRUE(bs.ok()) << bs.error_message();
  ASSERT_EQ(report.results_size(), 1);

  std::set<int> run_sources, bench_sources;
  for (const v1::SolFigure& f : resp.sol()) run_sources.insert(f.source());
  for (const v1::SolFigure& f : report.results(0).sol()) bench_sources.insert(f.source());
  EXPECT_FALSE(run_sources.empty());
  EXPECT_EQ(run_sources, bench_sources);
  EXPECT_EQ(resp.bytes_moved(), report.results(0).bytes_moved());
}

TEST_F(ServiceTest, RoundTripOf66MegabyteTensors) {
  // 16254 x 2048 bf16: the largest workload of the h2048 suite, 66.6 MB per tensor.
  const RunRequest req = MakeRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 16254, 2048, 3);
  ASSERT_EQ(req.hidden_states().data().size(), 16254u * 2048u * 2u);
  RunResponse resp;
  const grpc::Status s = client().Run(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(CompareWithReference(req, resp), "");
}

TEST_F(ServiceTest, BenchmarkStreamsStartedThenOneProgressPerWorkloadThenTheReport) {
  v1::BenchmarkRequest req;
  req.set_suite("fused_add_rmsnorm_h2048");
  req.mutable_protocol()->set_warmup(1);
  req.mutable_protocol()->set_repetitions(3);
  std::vector<v1::BenchmarkEvent> events;
  const grpc::Status s =
      client().Benchmark(req, [&](const v1::BenchmarkEvent& e) { events.push_back(e); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::vector<std::int64_t> batches = {1, 6, 34, 64, 79, 12383, 16254};
  ASSERT_EQ(events.size(), batches.size() + 2);
  ASSERT_TRUE(events.front().has_started());
  EXPECT_EQ(events.front().started().suite(), "fused_add_rmsnorm_h2048");
  EXPECT_EQ(events.front().started().workload_count(), batches.size());
  EXPECT_EQ(events.front().started().devices_size(), 1);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    ASSERT_TRUE(events[i + 1].has_progress()) << i;
    const v1::BenchmarkProgress& p = events[i + 1].progress();
    EXPECT_EQ(p.workload_index(), i);
    EXPECT_EQ(p.workload_count(), batches.size());
    EXPECT_EQ(p.results_size(), 2);  // cpu_fused and cpu_unfused
    EXPECT_EQ(p.results(0).axes().at("batch_size"), batches[i]);
  }
  ASSERT_TRUE(events.back().has_report());
  const v1::BenchmarkReport& report = events.back().report();
  EXPECT_EQ(report.suite(), "fused_add_rmsnorm_h2048");
  EXPECT_TRUE(report.complete());
  EXPECT_EQ(report.protocol().repetitions(), 3u);
  EXPECT_EQ(report.protocol().cache(), v1::CACHE_MODE_COLD);
  ASSERT_EQ(report.results_size(), 14);
  for (const v1::WorkloadResult& r : report.results()) {
    SCOPED_TRACE(r.workload() + " " + r.implementation());
    EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.error() << r.correctness().detail();
    EXPECT_EQ(r.latency().samples(), 3u);
    EXPECT_GT(r.latency().median_seconds(), 0);
    EXPECT_LE(r.latency().min_seconds(), r.latency().median_seconds());
    EXPECT_LE(r.latency().median_seconds(), r.latency().max_seconds());
    EXPECT_EQ(r.bytes_moved(), 2u * (3u * r.axes().at("batch_size") * 2048 + 2048));
    EXPECT_GT(r.bytes_per_second(), 0);
    ASSERT_GE(r.sol_size(), 1);
    EXPECT_EQ(r.timer(), v1::TIMER_HOST_CLOCK);
    EXPECT_TRUE(r.correctness().passed());
    EXPECT_GE(r.rank(), 1u);
    EXPECT_GE(r.vs_best(), 1.0);
  }
  ASSERT_EQ(report.summaries_size(), 2);
  for (const v1::ImplementationSummary& sum : report.summaries()) {
    EXPECT_EQ(sum.passed(), 7u);
    EXPECT_EQ(sum.failed(), 0u);
    EXPECT_GE(sum.rank(), 1u);
    EXPECT_GT(sum.mean_latency_seconds(), 0);
    EXPECT_GT(sum.geomean_sol_ratio(), 0);
  }
  ASSERT_EQ(report.environments_size(), 1);
  EXPECT_EQ(report.environments(0).device().name(), "cpu");
  EXPECT_FALSE(report.environments(0).server_version().empty());
  EXPECT_FALSE(report.environments(0).timestamp().empty());
}

TEST_F(ServiceTest, BenchmarkRequestErrors) {
  auto code_of = [&](const v1::BenchmarkRequest& req, std::string* msg) {
    const grpc::Status s = client().Benchmark(req, [](const v1::BenchmarkEvent&) {});
    *msg = s.error_message();
    return s.error_code();
  };
  std::string msg;
  v1::BenchmarkRequest req;
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(msg.find("suite"), std::string::npos);
  req.set_suite("no_such_suite");
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(msg.find("suite"), std::string::npos);
  req.set_suite("fused_add_rmsnorm_h2048");
  req.add_implementations("cuda_fused");
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(msg.find("implementations[0]"), std::string::npos);
  req.clear_implementations();
  req.mutable_protocol()->set_cuda_graph(true);
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(msg.find("protocol.cuda_graph"), std::string::npos);
  req.mutable_protocol()->set_cuda_graph(false);
  req.mutable_protocol()->set_repetitions(10000000);
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(msg.find("protocol.repetitions"), std::string::npos);
  req.mutable_protocol()->set_repetitions(3);
  req.mutable_protocol()->mutable_adaptive()->set_target_relative_spread(-1);
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(msg.find("protocol.adaptive.target_relative_spread"), std::string::npos);
  req.clear_protocol();
  req.set_device("cpu:9");
  EXPECT_EQ(code_of(req, &msg), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(msg.find("device"), std::string::npos);
}

TEST_F(ServiceTest, CustomSuiteInTheRequest) {
  v1::BenchmarkRequest req;
  v1::SuiteDefinition* s = req.mutable_custom_suite();
  s->set_name("tiny");
  s->set_dtype(v1::DTYPE_FP16);
  s->set_mode(v1::MODE_IN_PLACE);
  s->set_eps(1e-5);
  v1::Axis* batch = s->add_axes();
  batch->set_name("batch_size");
  v1::Axis* hidden = s->add_axes();
  hidden->set_name("hidden_size");
  hidden->set_is_const(true);
  hidden->set_value(96);
  for (int b : {1, 5}) (*s->add_workloads()->mutable_axes())["batch_size"] = b;
  req.mutable_protocol()->set_repetitions(2);
  req.mutable_protocol()->set_warmup(0);
  req.add_implementations("cpu_fused");
  v1::BenchmarkReport report;
  const grpc::Status st = client().Benchmark(req, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(report.results_size(), 2);
  EXPECT_EQ(report.results(1).bytes_moved(), 2u * (4 * 5 * 96 + 96));
  for (const auto& r : report.results()) EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED);

  (*s->mutable_workloads(1)->mutable_axes())["batch_size"] = -3;
  const grpc::Status bad = client().Benchmark(req, [](const v1::BenchmarkEvent&) {});
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("custom_suite"), std::string::npos) << bad.error_message();
}

TEST_F(ServiceTest, HealthAndReadiness) {
  bool serving = false;
  ASSERT_TRUE(client().HealthCheck("", &serving).ok());
  EXPECT_TRUE(serving);
  ASSERT_TRUE(client().HealthCheck("readiness", &serving).ok());
  EXPECT_TRUE(serving);
  EXPECT_EQ(client().HealthCheck("no.such.Service", &serving).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ReflectionListsTheService) {
  std::vector<std::string> services;
  const grpc::Status s = client().ListReflectionServices(&services);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(std::find(services.begin(), services.end(), "kerneleval.v1.KernelEval"),
            services.end());
  EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"), services.end());
}

TEST_F(ServiceTest, DiscoveryListsDevicesSuitesAndImplementations) {
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(client().ListDevices(&devices).ok());
  ASSERT_EQ(devices.devices_size(), 1);
  EXPECT_EQ(devices.devices(0).name(), "cpu");
  EXPECT_GT(devices.devices(0).measured_copy_bytes_per_second(), 0);
  EXPECT_EQ(devices.devices(0).queue_capacity(), 64u);
  // What the cold protocol reads between calls, and how long one read took at warm-up.
  EXPECT_EQ(devices.devices(0).cold_flush_bytes(), 2 * devices.devices(0).l2_cache_bytes());
  EXPECT_GT(devices.devices(0).cold_flush_bytes(), 0u);
  EXPECT_GT(devices.devices(0).cold_flush_seconds(), 0);
  v1::ListSuitesResponse suites;
  ASSERT_TRUE(client().ListSuites(&suites).ok());
  std::vector<std::string> names;
  for (const auto& s : suites.suites()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "fused_add_rmsnorm_h2048"), names.end());
  v1::ListImplementationsResponse impls;
  ASSERT_TRUE(client().ListImplementations("cpu", &impls).ok());
  ASSERT_EQ(impls.implementations_size(), 2);
  EXPECT_EQ(impls.implementations(0).name(), "cpu_fused");
  EXPECT_TRUE(impls.implementations(0).is_default());
  EXPECT_EQ(client().ListImplementations("cuda:3", &impls).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace kerneleval::testing
