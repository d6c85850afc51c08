// The service end to end on cuda:0: Run and Benchmark through the client library against
// a real server, with the device in the server process and in a device host process; and
// the CUDA fault path: an illegal address in a device host, the host replaced, the device
// serving again. Skipped where no GPU is present.
//
// The suites are found by --suites-dir=PATH, else in the first `suites` folder holding the
// h2048 suite above this executable (the build tree, or a bundle copied anywhere beside the
// repository's suites/), else under the working directory: never at a path compiled in.
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/tensors.h"
#include "lazy_half_rows.h"
#include "request_helpers.h"
#include "server/app/device_factory.h"
#include "server/cuda/cuda_backend.h"
#include "test_server.h"

namespace kerneleval::testing {

std::string g_suites_dir;  // --suites-dir

namespace {

std::string SuitesDir() {
  if (!g_suites_dir.empty()) return g_suites_dir;
  namespace fs = std::filesystem;
  std::error_code ec;
  auto holds_suites = [&](const fs::path& dir) {
    return fs::exists(dir / "suites" / "fused_add_rmsnorm_h2048.json", ec);
  };
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !ec && !dir.empty(); dir = dir.parent_path()) {
    if (holds_suites(dir)) return (dir / "suites").string();
    if (dir == dir.root_path()) break;
  }
  return (fs::current_path(ec) / "suites").string();
}

// kerneleval-planted-device-host (tests/gpu): the device host with the planted
// lazy_half_rows, next to the test binary when both were copied together (a bundle for a GPU
// machine), else where the build put it.
std::string PlantedDeviceHostPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path sibling = exe.parent_path() / "kerneleval-planted-device-host";
  if (!ec && std::filesystem::exists(sibling, ec)) return sibling.string();
  return KERNELEVAL_TEST_PLANTED_DEVICE_HOST;
}

// One server per isolation, started by the first test that needs it.
class ServiceGpuTest : public ::testing::TestWithParam<server::DeviceIsolation> {
 protected:
  static void TearDownTestSuite() {
    for (auto& [isolation, server] : servers_) delete server;
    servers_.clear();
  }
  void SetUp() override {
    if (server::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    TestServer*& server = servers_[GetParam()];
    if (server == nullptr) {
      server::ServerOptions o = LoopbackOptions();
      o.suites_dir = SuitesDir();
      o.device = "cuda:0";
      o.device_isolation = GetParam();
      o.device_host_path = PlantedDeviceHostPath();
      o.enable_fault_injection = true;
      // In process, the test builds the device the server would, with the planted kernel.
      std::vector<std::unique_ptr<server::Backend>> backends;
      if (GetParam() == server::DeviceIsolation::kThread) {
        std::vector<server::CudaImplementation> impls = server::BuiltinCudaImplementations();
        impls.push_back(server::FaultInjectionImplementation());
        impls.push_back(LazyHalfRowsImplementation());
        backends.push_back(std::make_unique<server::CudaBackend>(0, std::move(impls)));
      }
      server = new TestServer(StartServer(o, std::move(backends)));
    }
    server_ = server;
    ASSERT_NE(server_->client, nullptr);
  }
  client::KernelEvalClient& client() { return *server_->client; }

  TestServer* server_ = nullptr;
  static std::map<server::DeviceIsolation, TestServer*> servers_;
};
std::map<server::DeviceIsolation, TestServer*> ServiceGpuTest::servers_;

TEST_P(ServiceGpuTest, RunMatchesTheReferenceForEveryDtypeAndMode) {
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
        // One call (the result call is the timed one) and three calls after it.
        for (auto [impl, repetitions] :
             {std::pair<const char*, unsigned>{"cuda_fused", 1}, {"cuda_unfused", 3}}) {
          req.set_implementation(impl);
          req.set_repetitions(repetitions);
          v1::RunResponse resp;
          const grpc::Status s = client().Run(req, &resp);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_EQ(resp.device(), "cuda:0");
          EXPECT_TRUE(resp.correctness().passed()) << impl << ": " << resp.correctness().detail();
          EXPECT_EQ(resp.latency().samples(), repetitions);
          EXPECT_GT(resp.latency().median_seconds(), 0);
          EXPECT_EQ(resp.timer(), v1::TIMER_CUDA_EVENTS);  // Run's default on a GPU
          EXPECT_EQ(resp.has_residual_out(), mode != v1::MODE_OUTPUT);
        }
      }
    }
  }
}

TEST_P(ServiceGpuTest, RunTimesWithCuptiWhenAsked) {
  v1::RunRequest req;
  *req.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_BF16, {79, 2048}, 1);
  *req.mutable_residual() = client::RandomTensor(v1::DTYPE_BF16, {79, 2048}, 2);
  *req.mutable_weight() = client::RandomTensor(v1::DTYPE_BF16, {2048}, 3);
  req.set_timer(v1::TIMER_CUPTI);
  req.set_repetitions(5);
  v1::RunResponse resp;
  const grpc::Status s = client().Run(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.timer(), v1::TIMER_CUPTI);
  EXPECT_EQ(resp.latency().samples(), 5u);
  req.set_timer(v1::TIMER_HOST_CLOCK);
  const grpc::Status host = client().Run(req, &resp);
  EXPECT_EQ(host.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(host.error_message().find("timer"), std::string::npos);
}

TEST_P(ServiceGpuTest, BenchmarkTheSuiteColdAndInGraphReplay) {
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
    for (const v1::WorkloadResult& r : report.results()) {
      SCOPED_TRACE(r.workload() + " " + r.implementation());
      const char* expected = graph                          ? "cuda_events, hot, graph x"
                             : r.timer() == v1::TIMER_CUPTI ? "cupti, cold"
                                                            : "cuda_events, cold";
      EXPECT_EQ(r.measured_as().rfind(expected, 0), 0u) << r.measured_as();
      if (env.clocks_available()) {
        // Clocks read while the samples ran, and the admission wait before them.
        EXPECT_GT(r.clocks().samples(), 0u);
        EXPECT_GT(r.clocks().sm_mhz_max(), 0u);
        EXPECT_TRUE(r.admission().checked());
        EXPECT_GT(r.admission().sm_mhz_after(), 0u);
      }
    }
    if (env.clocks_available()) EXPECT_GT(env.clocks_during().samples(), 0u);
    EXPECT_FALSE(env.device().model().empty());
    EXPECT_FALSE(env.device().uuid().empty());
    EXPECT_GT(env.device().sm_count(), 0);
    EXPECT_GT(env.device().peak_bytes_per_second(), 0);
  }
}

// CUPTI attached for a window and detached after it (cuptiFinalize): a graph replayed while
// tracing was on faults (Xid 31) if launched after the detach, so the backend must rebuild
// it before it counts DRAM bytes. Every later call must still run and pass.
TEST_P(ServiceGpuTest, CuptiWindowsInGraphReplayLeaveTheDeviceHealthy) {
  v1::BenchmarkRequest req;
  *req.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 79}, 2048);
  req.add_implementations("cuda_fused");
  v1::Protocol& p = *req.mutable_protocol();
  p.set_repetitions(5);
  p.set_warmup(1);
  p.set_cuda_graph(true);
  p.set_graph_calls(10);
  p.set_timer(v1::TIMER_CUPTI);
  p.set_measure_dram_bytes(true);
  for (int round = 0; round < 2; ++round) {
    v1::BenchmarkReport report;
    const grpc::Status s = client().Benchmark(req, [&](const v1::BenchmarkEvent& e) {
      if (e.has_report()) report = e.report();
    });
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(report.results_size(), 2);
    for (const v1::WorkloadResult& r : report.results()) {
      EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.error();
      EXPECT_EQ(r.timer(), v1::TIMER_CUPTI);
      EXPECT_TRUE(r.has_dram());
    }
  }
  // Events after the windows: no trace of CUPTI, and correct.
  v1::RunRequest run;
  *run.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_BF16, {79, 2048}, 4);
  *run.mutable_residual() = client::RandomTensor(v1::DTYPE_BF16, {79, 2048}, 5);
  *run.mutable_weight() = client::RandomTensor(v1::DTYPE_BF16, {2048}, 6);
  run.set_check_correctness(true);
  run.set_repetitions(5);
  v1::RunResponse resp;
  const grpc::Status s = client().Run(run, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.correctness().passed()) << resp.correctness().detail();
}

// With the CUPTI timer, each result splits its calls into their kernels: the two-kernel
// baseline into its add, the gap and its norm, whose means add up to the mean of the
// samples (a span is its first kernel's start to its last's end), the fused kernel into one.
TEST_P(ServiceGpuTest, CuptiResultsSplitEachCallIntoItsKernels) {
  v1::BenchmarkRequest req;
  *req.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 79}, 2048);
  req.add_implementations("cuda_fused");
  req.add_implementations("cuda_unfused");
  req.mutable_protocol()->set_repetitions(20);
  req.mutable_protocol()->set_warmup(3);
  req.mutable_protocol()->set_timer(v1::TIMER_CUPTI);
  v1::BenchmarkReport report;
  const grpc::Status s = client().Benchmark(req, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(report.results_size(), 4);
  for (const v1::WorkloadResult& r : report.results()) {
    SCOPED_TRACE(r.workload() + " " + r.implementation());
    ASSERT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.error();
    const bool unfused = r.implementation() == "cuda_unfused";
    ASSERT_EQ(r.kernels_size(), unfused ? 2 : 1);
    double mean_sum = 0;
    for (const v1::KernelTiming& k : r.kernels()) {
      EXPECT_EQ(k.duration().samples(), 20u);  // the timed calls, no warm-up
      EXPECT_GT(k.duration().min_seconds(), 0);
      mean_sum += k.duration().mean_seconds() + k.gap_before().mean_seconds();
    }
    EXPECT_NEAR(mean_sum, r.latency().mean_seconds(), 1e-12);
    if (unfused) {
      EXPECT_NE(r.kernels(0).name().find("AddKernel"), std::string::npos) << r.kernels(0).name();
      EXPECT_NE(r.kernels(1).name().find("RowKernel"), std::string::npos) << r.kernels(1).name();
      EXPECT_EQ(r.kernels(1).gap_before().samples(), 20u);
    } else {
      EXPECT_FALSE(r.kernels(0).has_gap_before());
    }
  }
  // Events time whole windows: no breakdown.
  req.mutable_protocol()->set_timer(v1::TIMER_CUDA_EVENTS);
  const grpc::Status e = client().Benchmark(req, [&](const v1::BenchmarkEvent& ev) {
    if (ev.has_report()) report = ev.report();
  });
  ASSERT_TRUE(e.ok()) << e.error_message();
  for (const v1::WorkloadResult& r : report.results()) EXPECT_EQ(r.kernels_size(), 0);
}

// DRAM bytes beside the declared ones: the fused kernel reads what the definition needs,
// and the lazy implementation (half the rows after its first call) passes the correctness
// check but is flagged for moving too few bytes, and so rejected. Where the counters cannot be read
// (gVisor), the result says so and the test skips, visibly.
TEST_P(ServiceGpuTest, DramCountersFlagALazyImplementation) {
  v1::BenchmarkRequest req;
  *req.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {16254}, 2048);
  req.add_implementations("cuda_fused");
  req.add_implementations("lazy_half_rows");
  req.mutable_protocol()->set_repetitions(5);
  req.mutable_protocol()->set_warmup(1);
  req.mutable_protocol()->set_measure_dram_bytes(true);
  v1::BenchmarkReport report;
  const grpc::Status s = client().Benchmark(req, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(report.results_size(), 2);
  std::map<std::string, const v1::WorkloadResult*> by_impl;
  for (const v1::WorkloadResult& r : report.results()) by_impl[r.implementation()] = &r;
  const v1::WorkloadResult& fused = *by_impl.at("cuda_fused");
  const v1::WorkloadResult& lazy = *by_impl.at("lazy_half_rows");
  ASSERT_TRUE(fused.has_dram());
  if (!fused.dram().available()) {
    EXPECT_EQ(fused.dram().unavailable_reason().rfind("counters unavailable on this machine", 0),
              0u)
        << fused.dram().unavailable_reason();
    EXPECT_EQ(fused.dram().read_bytes(), 0);
    GTEST_SKIP() << fused.dram().unavailable_reason();
  }
  const double declared_read = static_cast<double>(fused.dram().declared_read_bytes());
  EXPECT_GT(fused.dram().read_bytes(), 0.95 * declared_read);
  for (const std::string& flag : fused.integrity_flags()) ADD_FAILURE() << flag;
  // Its outputs pass the fp64 check; the traffic finding makes it REJECTED, never ranked.
  EXPECT_TRUE(lazy.correctness().passed()) << lazy.correctness().detail();
  EXPECT_EQ(lazy.status(), v1::RESULT_STATUS_REJECTED) << lazy.error();
  EXPECT_LT(lazy.dram().read_bytes(), 0.6 * declared_read);
  bool flagged_reads = false;
  for (const std::string& flag : lazy.integrity_flags()) {
    flagged_reads = flagged_reads || flag.find("DRAM reads") != std::string::npos;
  }
  EXPECT_TRUE(flagged_reads) << lazy.integrity_flags_size() << " flags";
}

bool WaitForReadiness(const client::KernelEvalClient& client, bool want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    bool serving = !want;
    if (client.HealthCheck("readiness", &serving).ok() && serving == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A sticky CUDA fault, three times over: each time the faulting call answers INTERNAL,
// readiness drops, the host process is replaced and cuda:0 computes correctly again. In
// the server process this cannot work on current drivers (cudaDeviceReset, then
// cudaErrorDevicesUnavailable), so only the device host isolation is tested.
TEST_P(ServiceGpuTest, IllegalAddressReplacesTheDeviceHost) {
  if (GetParam() != server::DeviceIsolation::kProcess) GTEST_SKIP() << "device host only";
  v1::RunRequest fault;
  *fault.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_BF16, {4, 2048}, 1);
  *fault.mutable_residual() = client::RandomTensor(v1::DTYPE_BF16, {4, 2048}, 2);
  *fault.mutable_weight() = client::RandomTensor(v1::DTYPE_BF16, {2048}, 3);
  fault.set_implementation("fault_illegal_address");
  v1::RunRequest good = fault;
  good.clear_implementation();
  good.set_check_correctness(true);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    v1::RunResponse resp;
    const grpc::Status s = client().Run(fault, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_NE(s.error_message().find("cudaErrorIllegalAddress"), std::string::npos)
        << s.error_message();
    bool serving = true;
    ASSERT_TRUE(client().HealthCheck("readiness", &serving).ok());
    EXPECT_FALSE(serving);
    ASSERT_TRUE(WaitForReadiness(client(), true));
    const grpc::Status ok = client().Run(good, &resp);
    ASSERT_TRUE(ok.ok()) << ok.error_message();
    EXPECT_TRUE(resp.correctness().passed()) << resp.correctness().detail();
  }
}

INSTANTIATE_TEST_SUITE_P(Isolation, ServiceGpuTest,
                         ::testing::Values(server::DeviceIsolation::kThread,
                                           server::DeviceIsolation::kProcess),
                         [](const auto& info) {
                           return info.param == server::DeviceIsolation::kThread ? "InProcess"
                                                                                 : "DeviceHost";
                         });

}  // namespace
}  // namespace kerneleval::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    constexpr const char* kFlag = "--suites-dir=";
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      kerneleval::testing::g_suites_dir = argv[i] + std::strlen(kFlag);
    }
  }
  return RUN_ALL_TESTS();
}
