// A Benchmark that prepares the next workload's inputs and fp64 reference while one is
// measured gives the same results, bit for bit, as one that prepares them serially, and says
// how long the device waited for the host. The CPU backend prepares serially unless the
// server is told otherwise (ServerOptions::benchmark_host_preparation), which is how this
// runs the prepared-ahead path on a machine without a GPU.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/input_generator.h"
#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using server::HostPreparation;

constexpr std::uint64_t kSeed = 31;

TestServer StartWith(HostPreparation preparation) {
  server::ServerOptions options = LoopbackOptions();
  options.benchmark_host_preparation = preparation;
  return StartServer(options);
}

// Shapes that differ from one workload to the next, so that a reference or an input set
// handed to the wrong workload could not pass; output and residual_out both checked.
v1::BenchmarkRequest Request() {
  v1::BenchmarkRequest req;
  v1::SuiteDefinition suite = SmallSuite(v1::DTYPE_BF16, {257, 1, 64, 3}, 2048);
  suite.set_mode(v1::MODE_OUTPUT_AND_RESIDUAL);
  *req.mutable_custom_suite() = suite;
  req.add_implementations("cpu_fused");
  req.add_implementations("cpu_unfused");
  req.mutable_protocol()->set_repetitions(2);
  req.mutable_protocol()->set_warmup(0);
  req.mutable_protocol()->set_seed(kSeed);
  return req;
}

v1::BenchmarkReport RunBenchmark(client::KernelEvalClient& c, const v1::BenchmarkRequest& req) {
  v1::BenchmarkReport report;
  const grpc::Status s = c.Benchmark(req, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  EXPECT_TRUE(s.ok()) << s.error_message();
  return report;
}

// cpu_fused's correctness on workload `index` of `suite` as the test computes it: the inputs
// from the workload's seeds, the kernel on one thread (rows are independent, so the server's
// threads write the same bytes) and the fp64 oracle of kernels/, not the server's Reference.
v1::Correctness OracleCorrectness(const v1::SuiteDefinition& suite, int index) {
  const std::int64_t batch = suite.workloads(index).axes().at("batch_size");
  const std::int64_t hidden = suite.axes(1).value();
  const std::size_t n = static_cast<std::size_t>(batch * hidden);
  const DType dtype = DType::kBF16;
  const auto at = static_cast<std::uint64_t>(index);
  const std::vector<std::uint8_t> x =
      RandomTensor(dtype, n, DeriveSeed(kSeed, "hidden_states", at));
  const std::vector<std::uint8_t> r = RandomTensor(dtype, n, DeriveSeed(kSeed, "residual", at));
  const std::vector<std::uint8_t> w =
      RandomTensor(dtype, static_cast<std::size_t>(hidden), DeriveSeed(kSeed, "weight", at));
  std::vector<std::uint8_t> out(n * ElementSize(dtype)), res(n * ElementSize(dtype));
  FusedAddRmsNormArgs a;
  a.dtype = dtype;
  a.mode = Mode::kOutputAndResidual;
  a.batch = batch;
  a.hidden = hidden;
  // The server's eps is a float for the kernel and the reference alike.
  a.eps = static_cast<float>(suite.eps());
  a.hidden_states = x.data();
  a.residual = r.data();
  a.weight = w.data();
  a.output = out.data();
  a.residual_out = res.data();
  FusedAddRmsNormCpu(a);
  std::vector<double> ref_out(n), ref_res(n);
  FusedAddRmsNormReference(dtype, batch, hidden, a.eps, x.data(), r.data(), w.data(),
                           ref_out.data(), ref_res.data());
  const v1::Tolerance tolerance = server::DefaultTolerance(dtype);
  return server::MergeCorrectness(
      server::CheckAgainstReference(dtype, out.data(), ref_out.data(), n, tolerance, "output"),
      server::CheckAgainstReference(dtype, res.data(), ref_res.data(), n, tolerance,
                                    "residual_out"));
}

// Every result of `report` passed, keyed by (workload, implementation).
std::map<std::pair<std::string, std::string>, v1::WorkloadResult> Passed(
    const v1::BenchmarkReport& report) {
  std::map<std::pair<std::string, std::string>, v1::WorkloadResult> by_key;
  for (const v1::WorkloadResult& r : report.results()) {
    EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED)
        << r.workload() << " " << r.implementation() << ": " << r.error() << " "
        << r.correctness().detail();
    EXPECT_TRUE(r.correctness().checked());
    by_key[{r.workload(), r.implementation()}] = r;
  }
  return by_key;
}

TEST(BenchmarkPipeline, PreparedAheadMatchesSerialAndTheOracle) {
  const v1::BenchmarkRequest req = Request();
  const int workloads = req.custom_suite().workloads_size();
  TestServer serial = StartWith(HostPreparation::kSerial);
  TestServer ahead = StartWith(HostPreparation::kAhead);
  ASSERT_NE(serial.client, nullptr);
  ASSERT_NE(ahead.client, nullptr);

  const v1::BenchmarkReport s = RunBenchmark(*serial.client, req);
  const v1::BenchmarkReport a = RunBenchmark(*ahead.client, req);
  ASSERT_TRUE(s.complete());
  ASSERT_TRUE(a.complete());
  ASSERT_EQ(s.results_size(), workloads * 2);
  ASSERT_EQ(a.results_size(), workloads * 2);
  const auto serial_results = Passed(s);
  const auto ahead_results = Passed(a);

  // The same inputs and references: every error figure equal, not merely within tolerance.
  for (const auto& [key, r] : ahead_results) {
    SCOPED_TRACE(key.first + " " + key.second);
    ASSERT_EQ(serial_results.count(key), 1u);
    const v1::Correctness& got = r.correctness();
    const v1::Correctness& want = serial_results.at(key).correctness();
    EXPECT_EQ(got.max_abs_error(), want.max_abs_error());
    EXPECT_EQ(got.max_rel_error(), want.max_rel_error());
    EXPECT_EQ(got.matched_ratio(), want.matched_ratio());
    EXPECT_EQ(got.mismatched(), want.mismatched());
    EXPECT_EQ(r.bytes_moved(), serial_results.at(key).bytes_moved());
  }

  // Each workload was checked on its own inputs against the fp64 oracle.
  for (int i = 0; i < workloads; ++i) {
    const v1::Correctness oracle = OracleCorrectness(req.custom_suite(), i);
    EXPECT_TRUE(oracle.passed()) << oracle.detail();
    const v1::WorkloadResult& r = a.results(2 * i);
    ASSERT_EQ(r.implementation(), "cpu_fused");
    EXPECT_EQ(r.correctness().max_abs_error(), oracle.max_abs_error()) << r.workload();
  }

  // The wait for the host, per workload: all of the preparation when serial; ahead, every
  // workload after the first was prepared while its predecessor was measured.
  ASSERT_EQ(s.environments_size(), 1);
  ASSERT_EQ(a.environments_size(), 1);
  for (const v1::BenchmarkReport* report : {&s, &a}) {
    const v1::Environment& env = report->environments(0);
    ASSERT_EQ(env.host_wait_seconds_size(), workloads);
    for (double wait : env.host_wait_seconds()) EXPECT_GE(wait, 0.0);
    EXPECT_GT(env.host_wait_seconds(0), 0.0);  // the first has nothing to overlap with
  }
  EXPECT_EQ(s.environments(0).workloads_prepared_ahead(), 0u);
  EXPECT_EQ(a.environments(0).workloads_prepared_ahead(),
            static_cast<std::uint32_t>(workloads - 1));
}

TEST(BenchmarkPipeline, CancelledMidRunLeavesTheDeviceToTheNextBenchmark) {
  const v1::BenchmarkRequest req = Request();
  TestServer t = StartWith(HostPreparation::kAhead);
  ASSERT_NE(t.client, nullptr);

  // Cancelled after the first workload's results, while the next one may be in preparation.
  auto stub = t.NewRawStub();
  grpc::ClientContext context;
  auto reader = stub->Benchmark(&context, req);
  for (v1::BenchmarkEvent e; reader->Read(&e);) {
    if (e.has_progress()) {
      context.TryCancel();
      break;
    }
  }
  for (v1::BenchmarkEvent e; reader->Read(&e);) {
  }
  const grpc::Status cancelled = reader->Finish();
  EXPECT_TRUE(cancelled.error_code() == grpc::StatusCode::CANCELLED || cancelled.ok())
      << cancelled.error_message();

  // The device's queue is FIFO: this one runs after the cancelled one has returned, with
  // nothing of it left behind.
  const v1::BenchmarkReport report = RunBenchmark(*t.client, req);
  ASSERT_TRUE(report.complete());
  ASSERT_EQ(report.results_size(), req.custom_suite().workloads_size() * 2);
  Passed(report);
  EXPECT_EQ(report.environments(0).workloads_prepared_ahead(),
            static_cast<std::uint32_t>(req.custom_suite().workloads_size() - 1));
}

}  // namespace
}  // namespace kerneleval::testing
