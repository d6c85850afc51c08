// One bad device stays one bad device, and one owner's flood stays one owner's: a real server
// on loopback with several CPU devices, some of them wrappers that play a GPU that never
// warms up or that faults and cannot be rebuilt. Checked from the outside: the health
// service of each device, readiness and liveness, the kerneleval_device_healthy series, which
// devices take Runs; and the order in which a device runs two owners' queued jobs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "played_gpu_backend.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A CPU device named `name` that plays a GPU: its warm-up waits for `warm` (a context that
// takes forever), and `fault` breaks it for good unless `can_recover` (a rebuild that fails).
class StuckOrBrokenGpu final : public PlayedGpu {
 public:
  explicit StuckOrBrokenGpu(const std::string& name) : PlayedGpu(name) {}
  std::vector<v1::Implementation> Implementations() const override {
    return CpuImplementationsAnd("fault", /*test_only=*/true);
  }
  absl::Status WarmUp() override {
    if (!warm.Wait()) return absl::InternalError("the test never let the warm-up end");
    return PlayedGpu::WarmUp();
  }
  absl::StatusOr<server::Measurement> Measure(const server::Problem& p,
                                              const server::HostInputs& in,
                                              const server::HostOutputs& out,
                                              const std::string& impl,
                                              const server::MeasureOptions& o) override {
    if (!Healthy()) return absl::UnavailableError("device is broken");
    if (impl == "fault") return Fault();
    return PlayedGpu::Measure(p, in, out, impl, o);
  }
  absl::Status Recover() override {
    ++recover_attempts;
    if (!can_recover.load()) return absl::InternalError("cudaErrorDevicesUnavailable (simulated)");
    Repaired();
    return absl::OkStatus();
  }

  Gate warm;
  std::atomic<bool> can_recover{false};
  std::atomic<int> recover_attempts{0};
};

// Polls `check` until it holds, for up to `limit`.
bool Eventually(const std::function<bool()>& check,
                std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return check();
}

// SERVING (1), NOT_SERVING (0), or -1 when the health call fails (an unknown service).
int Health(const client::KernelEvalClient& client, const std::string& service) {
  bool serving = false;
  if (!client.HealthCheck(service, &serving).ok()) return -1;
  return serving ? 1 : 0;
}

std::string DeviceService(const std::string& device) {
  return "kerneleval.v1.KernelEval/" + device;
}

double DeviceHealthy(const TestServer& t, const std::string& device) {
  return MetricValue(ScrapeMetrics(t.server->metrics_port()), "kerneleval_device_healthy",
                     {{"device", device}});
}

double DeviceGivenUp(const TestServer& t, const std::string& device) {
  return MetricValue(ScrapeMetrics(t.server->metrics_port()), "kerneleval_device_given_up",
                     {{"device", device}});
}

grpc::Status RunOn(const client::KernelEvalClient& client, const std::string& device,
                   const std::string& impl = "") {
  v1::RunRequest run = SmallRun(2, 8);
  run.set_device(device);
  if (!impl.empty()) run.set_implementation(impl);
  v1::RunResponse response;
  return client.Run(run, &response);
}

// A server whose readiness is not waited for (a device may never warm up), and its client.
TestServer StartUnwaited(server::ServerOptions options,
                         std::vector<std::unique_ptr<server::Backend>> backends) {
  TestServer t;
  auto started = server::KernelEvalServer::Start(options, std::move(backends));
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return t;
  t.server = std::move(*started);
  client::ClientOptions client_options;
  client_options.target = t.target();
  client_options.deadline_seconds = 60;
  EXPECT_TRUE(client::KernelEvalClient::Create(client_options, &t.client).ok());
  return t;
}

TEST(DeviceHealth, ADeviceThatNeverWarmsUpKeepsNoOneOut) {
  auto stuck = std::make_unique<StuckOrBrokenGpu>("cpu:1");
  StuckOrBrokenGpu* raw = stuck.get();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu:0"));
  backends.push_back(std::move(stuck));
  TestServer t = StartUnwaited(LoopbackOptions(), std::move(backends));
  // Destroyed before `t`, while the server still owns the backend: its shutdown joins the
  // stuck worker, which an early return would otherwise leave waiting.
  struct OpenAtEnd {
    StuckOrBrokenGpu* b;
    ~OpenAtEnd() { b->warm.Open(); }
  } open_at_end{raw};
  ASSERT_NE(t.client, nullptr);
  const client::KernelEvalClient& c = *t.client;

  // cpu:0 alone makes the server ready; cpu:1 is reported, not waited for.
  ASSERT_TRUE(Eventually([&] { return Health(c, "readiness") == 1; }));
  EXPECT_EQ(Health(c, ""), 1);  // liveness
  EXPECT_EQ(Health(c, "kerneleval.v1.KernelEval"), 1);
  EXPECT_EQ(Health(c, DeviceService("cpu:0")), 1);
  EXPECT_EQ(Health(c, DeviceService("cpu:1")), 0);
  EXPECT_TRUE(Eventually([&] { return DeviceHealthy(t, "cpu:0") == 1; }));
  EXPECT_TRUE(Eventually([&] { return DeviceHealthy(t, "cpu:1") == 0; }));
  const grpc::Status on_good = RunOn(c, "cpu:0");
  EXPECT_TRUE(on_good.ok()) << on_good.error_message();
  const grpc::Status on_stuck = RunOn(c, "cpu:1");
  EXPECT_EQ(on_stuck.error_code(), grpc::StatusCode::UNAVAILABLE) << on_stuck.error_message();
  EXPECT_NE(on_stuck.error_message().find("cpu:1"), std::string::npos);
  EXPECT_NE(on_stuck.error_message().find("warming up"), std::string::npos)
      << on_stuck.error_message();
  // Work without a device goes to the one that serves.
  const grpc::Status anywhere = RunOn(c, "");
  EXPECT_TRUE(anywhere.ok()) << anywhere.error_message();

  // The late device joins once warm.
  raw->warm.Open();
  EXPECT_TRUE(Eventually([&] { return Health(c, DeviceService("cpu:1")) == 1; }));
  EXPECT_TRUE(Eventually([&] { return DeviceHealthy(t, "cpu:1") == 1; }));
  const grpc::Status on_late = RunOn(c, "cpu:1");
  EXPECT_TRUE(on_late.ok()) << on_late.error_message();
  EXPECT_TRUE(t.server->WaitUntilReady(absl::Seconds(10)));
}

TEST(DeviceHealth, ABrokenDeviceIsOutAloneAndLivenessFailsOnlyWhenEveryDeviceIs) {
  auto first = std::make_unique<StuckOrBrokenGpu>("cpu:0");
  auto second = std::make_unique<StuckOrBrokenGpu>("cpu:1");
  StuckOrBrokenGpu* a = first.get();
  StuckOrBrokenGpu* b = second.get();
  a->warm.Open();
  b->warm.Open();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::move(first));
  backends.push_back(std::move(second));
  TestServer t = StartServer(LoopbackOptions(), std::move(backends));
  ASSERT_NE(t.client, nullptr);
  const client::KernelEvalClient& c = *t.client;
  EXPECT_EQ(Health(c, DeviceService("cpu:0")), 1);
  EXPECT_EQ(Health(c, DeviceService("cpu:1")), 1);

  // cpu:0 faults and cannot be rebuilt: it alone is out; the server stays ready and alive.
  const grpc::Status fault = RunOn(c, "cpu:0", "fault");
  EXPECT_EQ(fault.error_code(), grpc::StatusCode::INTERNAL) << fault.error_message();
  EXPECT_EQ(Health(c, DeviceService("cpu:0")), 0);  // turned before the caller heard
  EXPECT_EQ(Health(c, "readiness"), 1);
  // Five failed rebuilds (with their back-off) and the worker gives up on it.
  ASSERT_TRUE(Eventually([&] { return a->recover_attempts.load() >= 5; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Health(c, DeviceService("cpu:0")), 0);
  EXPECT_EQ(Health(c, DeviceService("cpu:1")), 1);
  EXPECT_EQ(Health(c, "readiness"), 1);
  EXPECT_EQ(Health(c, ""), 1);  // liveness: a restart would take cpu:1 down with it
  EXPECT_TRUE(Eventually([&] { return DeviceHealthy(t, "cpu:0") == 0; }));
  EXPECT_EQ(DeviceHealthy(t, "cpu:1"), 1);
  // Given up, where the alert reads it (KernelevalDeviceGivenUp); the other device is not.
  EXPECT_TRUE(Eventually([&] { return DeviceGivenUp(t, "cpu:0") == 1; }));
  EXPECT_EQ(DeviceGivenUp(t, "cpu:1"), 0);
  const grpc::Status refused = RunOn(c, "cpu:0");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_NE(refused.error_message().find("out of service"), std::string::npos)
      << refused.error_message();
  const grpc::Status served = RunOn(c, "cpu:1");
  EXPECT_TRUE(served.ok()) << served.error_message();
  const grpc::Status anywhere = RunOn(c, "");
  EXPECT_TRUE(anywhere.ok()) << anywhere.error_message();

  // The last device goes too: nothing serves, and only now liveness asks for a restart.
  EXPECT_EQ(RunOn(c, "cpu:1", "fault").error_code(), grpc::StatusCode::INTERNAL);
  ASSERT_TRUE(Eventually([&] { return Health(c, "") == 0; }));
  EXPECT_GE(b->recover_attempts.load(), 5);
  EXPECT_EQ(Health(c, "readiness"), 0);
  EXPECT_EQ(Health(c, DeviceService("cpu:1")), 0);
  EXPECT_EQ(RunOn(c, "").error_code(), grpc::StatusCode::UNAVAILABLE);
}

// Real device hosts (kerneleval-device-host children, one per CPU device) that crash for
// real: the crashed device's service is off before its caller hears of the fault, the
// server stays ready, and the device comes back alone.
TEST(DeviceHealth, ACrashedDeviceHostTakesOutOnlyItsDevice) {
  server::ServerOptions o = LoopbackOptions();
  o.device = "cpu";
  o.cpu_devices = 2;
  o.device_isolation = server::DeviceIsolation::kProcess;
  o.device_host_path = DeviceHostPath();
  o.enable_fault_injection = true;
  o.device_call_timeout_seconds = 120;
  TestServer t = StartServer(o);
  ASSERT_NE(t.client, nullptr);
  const client::KernelEvalClient& c = *t.client;
  EXPECT_EQ(Health(c, DeviceService("cpu:0")), 1);
  EXPECT_EQ(Health(c, DeviceService("cpu:1")), 1);
  const grpc::Status crash = RunOn(c, "cpu:0", "fault_crash");
  EXPECT_EQ(crash.error_code(), grpc::StatusCode::INTERNAL) << crash.error_message();
  // A host restart takes longer than these checks.
  EXPECT_EQ(Health(c, DeviceService("cpu:0")), 0);
  EXPECT_EQ(Health(c, DeviceService("cpu:1")), 1);
  EXPECT_EQ(Health(c, "readiness"), 1);
  EXPECT_EQ(Health(c, ""), 1);
  const grpc::Status other = RunOn(c, "cpu:1");
  EXPECT_TRUE(other.ok()) << other.error_message();
  EXPECT_TRUE(Eventually([&] { return Health(c, DeviceService("cpu:0")) == 1; }));
  const grpc::Status back = RunOn(c, "cpu:0");
  EXPECT_TRUE(back.ok()) << back.error_message();
}

// Owners from the token file; each client carries one owner's token.
constexpr char kAliceToken[] = "alice-token-5c1f0e7a9b";
constexpr char kBobToken[] = "bob-token-0d4e8a2c6f";

std::unique_ptr<client::KernelEvalClient> ClientOf(const TestServer& t, const char* token) {
  client::ClientOptions o;
  o.target = t.target();
  o.deadline_seconds = 120;
  o.bearer_token = token;
  std::unique_ptr<client::KernelEvalClient> c;
  EXPECT_TRUE(client::KernelEvalClient::Create(o, &c).ok());
  return c;
}

TEST(FairSharing, OneOwnersFloodDoesNotStarveAnothersJob) {
  // The device's default implementation records each job's width (each job has its own:
  // alice's holder 4, her flood 8 to 28, bob's 100) and holds them until the test lets go.
  struct Order {
    std::mutex mu;
    std::vector<std::int64_t> widths;  // one entry per job: a job calls it many times
    std::atomic<bool> open{false};
  };
  auto order = std::make_shared<Order>();
  std::vector<server::CpuImplementation> impls = server::BuiltinCpuImplementations();
  impls.insert(impls.begin(), {"recorded", "records the order of jobs (test only)",
                               [order](const FusedAddRmsNormArgs& a, void*) {
                                 {
                                   std::lock_guard<std::mutex> lock(order->mu);
                                   if (order->widths.empty() || order->widths.back() != a.hidden) {
                                     order->widths.push_back(a.hidden);
                                   }
                                 }
                                 while (!order->open.load()) {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                 }
                                 FusedAddRmsNormCpu(a);
                               }});
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu", impls));
  server::ServerOptions o = LoopbackOptions();
  o.auth_token = std::string("alice:") + kAliceToken + "\nbob:" + kBobToken + "\n";
  o.max_queued_per_owner = 6;
  TestServer t = StartServer(o, std::move(backends));
  ASSERT_NE(t.server, nullptr);
  auto alice = ClientOf(t, kAliceToken);
  auto bob = ClientOf(t, kBobToken);
  struct OpenAtEnd {
    Order* o;
    ~OpenAtEnd() { o->open = true; }
  } open_at_end{order.get()};

  auto run = [](const client::KernelEvalClient* c, int hidden) {
    return std::async(std::launch::async, [c, hidden] {
      v1::RunResponse response;
      return c->Run(SmallRun(2, hidden), &response);
    });
  };
  auto depth = [&] {
    v1::ListDevicesResponse devices;
    if (!alice->ListDevices(&devices).ok() || devices.devices_size() != 1) return 0u;
    return devices.devices(0).queue_depth();
  };
  std::vector<std::future<grpc::Status>> alices;
  alices.push_back(run(alice.get(), 4));  // holds the device
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(order->mu);
    return !order->widths.empty();
  }));
  // Her flood, up to her limit of waiting jobs; one more is refused before it queues.
  for (int i = 0; i < 6; ++i) {
    alices.push_back(run(alice.get(), 8 + 4 * i));
    ASSERT_TRUE(Eventually([&] { return depth() == static_cast<std::uint32_t>(2 + i); }));
  }
  v1::RunResponse refused_response;
  const grpc::Status refused = alice->Run(SmallRun(2, 64), &refused_response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("--max-queued-per-owner"), std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("alice"), std::string::npos);

  // Bob's one job is accepted behind her six and runs next.
  std::future<grpc::Status> bobs = run(bob.get(), 100);
  ASSERT_TRUE(Eventually([&] { return depth() == 8u; }));
  order->open = true;
  const grpc::Status bob_status = bobs.get();
  EXPECT_TRUE(bob_status.ok()) << bob_status.error_message();
  for (auto& f : alices) {
    const grpc::Status s = f.get();
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  std::lock_guard<std::mutex> lock(order->mu);
  ASSERT_EQ(order->widths.size(), 8u) << ::testing::PrintToString(order->widths);
  const auto bob_at = std::find(order->widths.begin(), order->widths.end(), 100);
  // FIFO would run him last, after all of alice's backlog; round-robin between owners runs
  // him right after the one of hers that was first in line: third, behind the holder.
  EXPECT_EQ(bob_at - order->widths.begin(), 2)
      << "jobs by width: " << ::testing::PrintToString(order->widths);
  // Hers keep their own order.
  std::vector<std::int64_t> hers(order->widths.begin(), order->widths.end());
  hers.erase(hers.begin() + 2);
  EXPECT_EQ(hers, (std::vector<std::int64_t>{4, 8, 12, 16, 20, 24, 28}));
}

}  // namespace
}  // namespace kerneleval::testing
