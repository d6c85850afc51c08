// Deliberately wrong implementations are caught by the correctness check and never ranked;
// several devices are benchmarked at once; the queue bound and the drain hold.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "kerneleval/kernels/half_types.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using server::CpuImplementation;

// Runs the correct kernel, then damages the result the way a buggy kernel would.
CpuImplementation Faulty(std::string name,
                         std::function<void(const FusedAddRmsNormArgs&, void*)> run) {
  return {std::move(name), "deliberately wrong (test only)", std::move(run)};
}

std::vector<CpuImplementation> WithFaultyImplementations() {
  std::vector<CpuImplementation> impls = server::BuiltinCpuImplementations();
  impls.push_back(Faulty("wrong_eps", [](const FusedAddRmsNormArgs& a, void*) {
    FusedAddRmsNormArgs b = a;
    b.eps = 1.0f;  // instead of 1e-6
    FusedAddRmsNormCpu(b);
  }));
  impls.push_back(Faulty("skipped_rows", [](const FusedAddRmsNormArgs& a, void*) {
    FusedAddRmsNormArgs b = a;
    b.batch = a.batch - 1;  // the last row is never written
    if (b.batch > 0) FusedAddRmsNormCpu(b);
  }));
  impls.push_back(Faulty("unwritten_tail", [](const FusedAddRmsNormArgs& a, void* scratch) {
    // Computes everything into scratch, copies all but the last 3 elements.
    FusedAddRmsNormArgs b = a;
    b.output = scratch;
    FusedAddRmsNormCpu(b);
    const std::size_t n = static_cast<std::size_t>(a.batch * a.hidden);
    const std::size_t keep = n > 3 ? n - 3 : 0;
    std::memcpy(a.output, scratch, keep * ElementSize(a.dtype));
  }));
  impls.push_back(Faulty("nan_output", [](const FusedAddRmsNormArgs& a, void*) {
    FusedAddRmsNormCpu(a);
    StoreFromFloat(a.dtype, a.output, static_cast<std::size_t>(a.batch * a.hidden) / 2, NAN);
  }));
  return impls;
}

v1::BenchmarkReport RunBenchmark(client::KernelEvalClient& c, v1::BenchmarkRequest req) {
  v1::BenchmarkReport report;
  const grpc::Status s = c.Benchmark(req, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  EXPECT_TRUE(s.ok()) << s.error_message();
  return report;
}

TEST(Ranking, WrongImplementationsAreCaughtAndNotRanked) {
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu", WithFaultyImplementations()));
  TestServer t = StartServer(LoopbackOptions(), std::move(backends));
  ASSERT_NE(t.client, nullptr);

  v1::BenchmarkRequest req;
  *req.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 3, 257}, 2048);
  req.mutable_protocol()->set_repetitions(2);
  req.mutable_protocol()->set_warmup(0);
  const v1::BenchmarkReport report = RunBenchmark(*t.client, req);
  ASSERT_EQ(report.results_size(), 3 * 6);
  for (const v1::WorkloadResult& r : report.results()) {
    SCOPED_TRACE(r.workload() + " " + r.implementation());
    const bool correct = r.implementation() == "cpu_fused" || r.implementation() == "cpu_unfused";
    if (correct) {
      EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.correctness().detail();
      EXPECT_GE(r.rank(), 1u);
      EXPECT_LE(r.rank(), 2u);
    } else {
      EXPECT_EQ(r.status(), v1::RESULT_STATUS_INCORRECT);
      EXPECT_FALSE(r.correctness().passed());
      EXPECT_FALSE(r.correctness().detail().empty());
      EXPECT_EQ(r.rank(), 0u);
    }
    if (r.implementation() == "nan_output") EXPECT_TRUE(r.correctness().has_nan());
  }
  for (const v1::ImplementationSummary& s : report.summaries()) {
    const bool correct = s.implementation() == "cpu_fused" || s.implementation() == "cpu_unfused";
    EXPECT_EQ(s.rank() > 0, correct) << s.implementation();
    EXPECT_EQ(s.failed(), correct ? 0u : 3u) << s.implementation();
  }
}

TEST(MultiDevice, BenchmarkOnAllDevicesReportsPerDevice) {
  server::ServerOptions o = LoopbackOptions();
  o.device = "cpu";
  o.cpu_devices = 3;
  TestServer t = StartServer(o);
  ASSERT_NE(t.client, nullptr);
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(t.client->ListDevices(&devices).ok());
  ASSERT_EQ(devices.devices_size(), 3);
  EXPECT_EQ(devices.devices(2).name(), "cpu:2");

  v1::BenchmarkRequest req;
  *req.mutable_custom_suite() = SmallSuite(v1::DTYPE_FP32, {2, 8}, 256);
  req.set_all_devices(true);
  req.add_implementations("cpu_fused");
  req.mutable_protocol()->set_repetitions(2);
  const v1::BenchmarkReport report = RunBenchmark(*t.client, req);
  ASSERT_EQ(report.environments_size(), 3);
  ASSERT_EQ(report.results_size(), 6);
  std::set<std::string> seen;
  for (const auto& r : report.results()) {
    seen.insert(r.device());
    EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED);
    EXPECT_EQ(r.rank(), 1u);  // ranked within its device
  }
  EXPECT_EQ(seen, (std::set<std::string>{"cpu:0", "cpu:1", "cpu:2"}));
  EXPECT_EQ(report.summaries_size(), 3);

  // A Run naming a device lands there.
  v1::RunRequest run = SmallRun(1, 4);
  run.set_device("cpu:1");
  v1::RunResponse resp;
  ASSERT_TRUE(t.client->Run(run, &resp).ok());
  EXPECT_EQ(resp.device(), "cpu:1");
}

// An implementation that blocks until released: holds the device so that jobs queue up.
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<int> entered{0};
};

// A CPU device whose default implementation waits at `gate`.
std::unique_ptr<server::Backend> GatedCpuBackend(std::shared_ptr<Gate> gate) {
  std::vector<CpuImplementation> impls = server::BuiltinCpuImplementations();
  impls.insert(impls.begin(), {"gated", "waits for the test (test only)",
                               [gate](const FusedAddRmsNormArgs& a, void*) {
                                 ++gate->entered;
                                 while (!gate->open.load()) {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                 }
                                 FusedAddRmsNormCpu(a);
                               }});
  return std::make_unique<server::CpuBackend>("cpu", impls);
}

TEST(Admission, FullQueueIsResourceExhaustedAndAcceptedWorkIsNotLost) {
  auto gate = std::make_shared<Gate>();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(GatedCpuBackend(gate));
  server::ServerOptions o = LoopbackOptions();
  o.queue_capacity = 2;
  TestServer t = StartServer(o, std::move(backends));
  ASSERT_NE(t.client, nullptr);
  // The gated implementation is the device default: the first Run holds the worker.

  const v1::RunRequest run = SmallRun(2, 4);

  std::vector<std::thread> callers;
  std::atomic<int> ok{0}, exhausted{0}, other{0};
  auto call = [&] {
    v1::RunResponse resp;
    const grpc::Status s = t.client->Run(run, &resp);
    if (s.ok()) {
      ++ok;
    } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_NE(s.error_message().find("queue of device cpu"), std::string::npos);
      ++exhausted;
    } else {
      ++other;
    }
  };
  callers.emplace_back(call);
  while (gate->entered.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // One running, two queued: the fourth and fifth are refused.
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back(call);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  gate->open = true;
  for (auto& c : callers) c.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(exhausted.load(), 2);
  EXPECT_EQ(other.load(), 0);
}

// The client sees DEADLINE_EXCEEDED from its own timer whatever the server does, so the
// server's side is checked through its metrics: the queued calls end as DEADLINE_EXCEEDED and
// the benchmark never started (a started one records a run of its suite).
// A server on one gated CPU device, and a Run that holds the device until Release().
struct HeldDevice {
  HeldDevice() {
    std::vector<std::unique_ptr<server::Backend>> backends;
    backends.push_back(GatedCpuBackend(gate));
    t = StartServer(LoopbackOptions(), std::move(backends));
    if (t.client == nullptr) return;
    holder = std::thread([this] {
      v1::RunResponse resp;
      EXPECT_TRUE(t.client->Run(SmallRun(1, 4), &resp).ok());
    });
    while (gate->entered.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HeldDevice() { Release(); }
  void Release() {
    gate->open = true;
    if (holder.joinable()) holder.join();
  }

  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  TestServer t;
  std::thread holder;
};

TEST(Admission, WorkWhoseDeadlinePassesInTheQueueIsNeverStarted) {
  HeldDevice held;
  ASSERT_NE(held.t.client, nullptr);
  TestServer& t = held.t;

  auto stub = t.NewRawStub();
  // Long enough to reach the server on a loaded machine (a call that expires before the
  // server sees it is never counted there), then passed while both calls wait in the queue.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
  grpc::Status bench_status, run_status;
  int measured_events = 0;  // progress or report; the run's announcement is not work
  std::thread bench_caller([&] {
    v1::BenchmarkRequest bench;
    bench.set_suite("fused_add_rmsnorm_h2048");
    bench.add_implementations("gated");
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto reader = stub->Benchmark(&context, bench);
    for (v1::BenchmarkEvent e; reader->Read(&e);) {
      if (!e.has_started()) ++measured_events;
    }
    bench_status = reader->Finish();
  });
  std::thread run_caller([&] {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    v1::RunResponse response;
    run_status = stub->Run(&context, SmallRun(1, 4), &response);
  });
  // Both calls are in the server (the holder's Run is the other one in flight) before their
  // deadline passes.
  auto inflight = [](const std::string& metrics, const char* method) {
    return MetricValue(metrics, "kerneleval_inflight_requests", {{"method", method}});
  };
  for (int i = 0; i < 1000; ++i) {
    const std::string metrics = ScrapeMetrics(t.server->metrics_port());
    if (inflight(metrics, "Run") >= 2 && inflight(metrics, "Benchmark") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  bench_caller.join();
  run_caller.join();
  // The server's deadline for a call is its receipt time plus the time the client had left,
  // so it passes a little after the client's; released before it, the queue would find the
  // calls cancelled by the client instead.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(bench_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << bench_status.error_message();
  EXPECT_EQ(measured_events, 0);
  EXPECT_EQ(run_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << run_status.error_message();

  held.Release();
  // The queue is FIFO: once this Run is answered, both queued jobs have been dequeued.
  v1::RunResponse resp;
  ASSERT_TRUE(t.client->Run(SmallRun(1, 4), &resp).ok());
  EXPECT_EQ(held.gate->entered.load(), 2);  // the holder and the last Run, not the expired Run

  auto code_count = [](const std::string& metrics, const char* method, const char* code) {
    return MetricValue(metrics, "kerneleval_rpc_requests_total",
                       {{"method", method}, {"code", code}});
  };
  std::string metrics;
  for (int i = 0; i < 500; ++i) {  // a finished RPC is recorded when gRPC reports it done
    metrics = ScrapeMetrics(t.server->metrics_port());
    if (code_count(metrics, "Benchmark", "DEADLINE_EXCEEDED") >= 1 &&
        code_count(metrics, "Run", "DEADLINE_EXCEEDED") >= 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(code_count(metrics, "Benchmark", "DEADLINE_EXCEEDED"), 1);
  EXPECT_EQ(code_count(metrics, "Run", "DEADLINE_EXCEEDED"), 1);
  for (const char* code : {"OK", "CANCELLED"}) {
    EXPECT_EQ(code_count(metrics, "Benchmark", code), -1) << code;
  }
  EXPECT_EQ(MetricValue(metrics, "kerneleval_benchmark_runs_total",
                        {{"suite", "fused_add_rmsnorm_h2048"}}),
            -1)
      << "the expired benchmark was started";
}

TEST(Admission, TimeCapCountsFromTheStartNotFromTheQueue) {
  HeldDevice held;
  ASSERT_NE(held.t.client, nullptr);
  TestServer& t = held.t;

  // Queued for longer than its cap: the cap must not have run out when it starts.
  v1::BenchmarkRequest bench;
  *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_FP32, {1, 2}, 64);
  bench.add_implementations("cpu_fused");
  bench.mutable_protocol()->set_repetitions(3);
  bench.mutable_protocol()->set_warmup(0);
  bench.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);  // microseconds of work in all
  bench.mutable_protocol()->set_max_total_seconds(2.0);
  v1::BenchmarkReport report;
  std::thread bencher([&] { report = RunBenchmark(*t.client, bench); });
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  held.Release();
  bencher.join();
  EXPECT_TRUE(report.complete());
  ASSERT_EQ(report.results_size(), 2);
  for (const v1::WorkloadResult& r : report.results()) {
    EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.workload() << " " << r.error();
  }
}

TEST(Drain, ShutdownFinishesAcceptedWorkThenRefusesNewWork) {
  auto gate = std::make_shared<Gate>();
  gate->open = true;
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(GatedCpuBackend(gate));
  TestServer t = StartServer(LoopbackOptions(), std::move(backends));
  ASSERT_NE(t.client, nullptr);
  gate->open = false;
  const int entered_before = gate->entered.load();

  const v1::RunRequest run = SmallRun(1, 4);

  grpc::Status in_flight;
  std::thread caller([&] {
    v1::RunResponse resp;
    in_flight = t.client->Run(run, &resp);
  });
  while (gate->entered.load() == entered_before) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::thread stopper([&] { t.server->Shutdown(absl::Seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  gate->open = true;
  caller.join();
  stopper.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  v1::RunResponse resp;
  EXPECT_FALSE(t.client->Run(run, &resp).ok());  // the server is gone
}

}  // namespace
}  // namespace kerneleval::testing
