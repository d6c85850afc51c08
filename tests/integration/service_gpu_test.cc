// The service end to end on cuda:0: Run and Benchmark through the client library against
// a real server. Skipped where no GPU is present.
#include <cmath>
#include <random>

#include "client/tensors.h"
#include "server/device_factory.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

class ServiceGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (server::CudaDeviceCount() == 0) return;
    server::ServerOptions o = LoopbackOptions();
    o.device = "cuda:0";
    server_ = new TestServer(StartServer(o));
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(server_->client, nullptr);
  }
  client::KernelEvalClient& client() { return *server_->client; }
  static TestServer* server_;
};
TestServer* ServiceGpuTest::server_ = nullptr;

TEST_F(ServiceGpuTest, RunMatchesTheReferenceForEveryDtypeAndMode) {
  std::uint64_t seed = 11;
  for (v1::DType dtype : {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32}) {
    for (v1::Mode mode : {v1::MODE_OUTPUT, v1::MODE_OUTPUT_AND_RESIDUAL, v1::MODE_IN_PLACE}) {
      for (auto [batch, hidden] : {std::pair<int, int>{1, 2048}, {257, 111}, {3, 5000}}) {
        SCOPED_TRACE(v1::DType_Name(dtype) + " " + v1::Mode_Name(mode) + " " +
                     std::to_string(batch) + "x" + std::to_string(hidden));
        v1::RunRequest req;
        *req.mutable_hidden_states() = client::RandomTensor(dtype, {batch, hidden}, ++seed);
        *req.mutable_residual() = client::RandomTensor(dtype, {batch, hidden}, ++seed);
        *req.mutable_weight() = client::RandomTensor(dtype, {hidden}, ++seed);
        req.set_mode(mode);
        req.set_check_correctness(true);
        req.set_repetitions(3);
        for (const char* impl : {"cuda_fused", "cuda_unfused"}) {
          req.set_implementation(impl);
          v1::RunResponse resp;
          const grpc::Status s = client().Run(req, &resp);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_EQ(resp.device(), "cuda:0");
          EXPECT_TRUE(resp.correctness().passed()) << impl << ": " << resp.correctness().detail();
          EXPECT_EQ(resp.latency().samples(), 3u);
          EXPECT_TRUE(resp.timer() == v1::TIMER_CUPTI || resp.timer() == v1::TIMER_CUDA_EVENTS);
          EXPECT_EQ(resp.has_residual_out(), mode != v1::MODE_OUTPUT);
        }
      }
    }
  }
}

TEST_F(ServiceGpuTest, BenchmarkTheSuiteColdAndInGraphReplay) {
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "graph" : "cold");
    v1::BenchmarkRequest req;
    req.set_suite("fused_add_rmsnorm_h2048");
    req.mutable_protocol()->set_repetitions(10);
    req.mutable_protocol()->set_warmup(2);
    req.mutable_protocol()->set_cuda_graph(graph);
    req.mutable_protocol()->set_rotate_inputs(graph);
    if (graph) req.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
    v1::BenchmarkReport report;
    int progress = 0;
    const grpc::Status s = client().Benchmark(req, [&](const v1::BenchmarkEvent& e) {
      if (e.has_progress()) ++progress;
      if (e.has_report()) report = e.report();
    });
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(progress, 7);
    ASSERT_EQ(report.results_size(), 14);
    for (const v1::WorkloadResult& r : report.results()) {
      SCOPED_TRACE(r.workload() + " " + r.implementation());
      EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.error() << r.correctness().detail();
      EXPECT_GT(r.latency().median_seconds(), 0);
      ASSERT_GE(r.sol_size(), 2);  // device attributes and datasheet
      EXPECT_EQ(r.sol(0).source(), v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
      EXPECT_GT(r.sol(0).sol_ratio(), 0);
      EXPECT_LT(r.sol(0).sol_ratio(), 1.0);
    }
    ASSERT_EQ(report.environments_size(), 1);
    const v1::Environment& env = report.environments(0);
    EXPECT_FALSE(env.device().model().empty());
    EXPECT_FALSE(env.device().uuid().empty());
    EXPECT_GT(env.device().sm_count(), 0);
    EXPECT_GT(env.device().peak_bytes_per_second(), 0);
  }
}

}  // namespace
}  // namespace kerneleval::testing
