// Process isolation: each device in a kerneleval-device-host child. The CPU device host
// carries test-only implementations that abort the process or never return, so that a
// crashed and a hung device are real processes dying or hanging, not a simulation. The
// server must answer the failing call with a clear error, drop readiness, start a new host,
// run the work queued behind the fault, and leave no process behind when it stops.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"

#include "server/device/device_settings.h"
#include "server/device/process_backend.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

// Generous: a benchmark on a busy 2-core builder took longer than 3 s, and only the hang
// test needs the timeout to fire (HungHostOptions).
server::ServerOptions IsolatedOptions() {
  server::ServerOptions o = LoopbackOptions();
  o.device = "cpu";
  o.device_isolation = server::DeviceIsolation::kProcess;
  o.device_host_path = DeviceHostPath();
  o.enable_fault_injection = true;
  o.device_call_timeout_seconds = 120;
  return o;
}

// Short enough for a test that waits for it, long enough for the small Runs around the hang
// on a loaded machine.
server::ServerOptions HungHostOptions() {
  server::ServerOptions o = IsolatedOptions();
  o.device_call_timeout_seconds = 10;
  return o;
}

// fp32 [batch, hidden] inputs in [-2, 2).
v1::RunRequest RandomRun(int batch, int hidden, v1::Mode mode, unsigned seed) {
  v1::RunRequest run = SmallRun(batch, hidden);
  run.set_mode(mode);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (v1::Tensor* t :
       {run.mutable_hidden_states(), run.mutable_residual(), run.mutable_weight()}) {
    std::string* data = t->mutable_data();
    for (std::size_t i = 0; i + 4 <= data->size(); i += 4) {
      const float v = dist(rng);
      std::memcpy(data->data() + i, &v, 4);
    }
  }
  return run;
}

// A small Run of one of the device host's test-only fault implementations.
v1::RunRequest FaultRun(const char* implementation) {
  v1::RunRequest run = SmallRun(2, 64);
  run.set_implementation(implementation);
  return run;
}

bool WaitForReadiness(const client::KernelEvalClient& client, bool want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    bool serving = !want;
    if (client.HealthCheck("readiness", &serving).ok() && serving == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void ExpectRunMatchesReference(const client::KernelEvalClient& client, v1::Mode mode,
                               unsigned seed) {
  const v1::RunRequest run = RandomRun(3, 320, mode, seed);
  v1::RunResponse resp;
  const grpc::Status s = client.Run(run, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string out, res;
  ComputeLocally(run, &out, &res);
  EXPECT_EQ(resp.output().data(), out);
  EXPECT_EQ(resp.residual_out().data(), res);
}

// Queued plus running jobs of the server's only device, once it reaches `depth`; false after
// a minute.
bool WaitForQueueDepth(const client::KernelEvalClient& client, std::uint32_t depth) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    v1::ListDevicesResponse devices;
    if (client.ListDevices(&devices).ok() && devices.devices_size() == 1 &&
        devices.devices(0).queue_depth() >= depth) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// No child of this process is left: every host was reaped.
void ExpectNoChildProcesses() {
  int status = 0;
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(DeviceHost, RunsAndBenchmarksLikeTheInProcessBackend) {
  {
    TestServer t = StartServer(IsolatedOptions());
    ASSERT_NE(t.client, nullptr);
    for (v1::Mode mode : {v1::MODE_OUTPUT, v1::MODE_OUTPUT_AND_RESIDUAL, v1::MODE_IN_PLACE}) {
      ExpectRunMatchesReference(*t.client, mode, 7 + mode);
    }
    v1::ListImplementationsResponse impls;
    ASSERT_TRUE(t.client->ListImplementations("", &impls).ok());
    bool crash_is_test_only = false;
    for (const v1::Implementation& i : impls.implementations()) {
      if (i.name() == "fault_crash") crash_is_test_only = i.test_only();
    }
    EXPECT_TRUE(crash_is_test_only);

    v1::BenchmarkRequest bench;
    *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 33}, 512);
    bench.mutable_protocol()->set_repetitions(5);
    v1::BenchmarkReport report;
    const grpc::Status s = t.client->Benchmark(bench, [&](const v1::BenchmarkEvent& e) {
      if (e.has_report()) report = e.report();
    });
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(report.results_size(), 4);  // two workloads x cpu_fused, cpu_unfused
    for (const v1::WorkloadResult& r : report.results()) {
      EXPECT_EQ(r.status(), v1::RESULT_STATUS_PASSED) << r.implementation() << " " << r.error();
      EXPECT_EQ(r.latency().samples(), 5u);
    }
    v1::ListDevicesResponse devices;
    ASSERT_TRUE(t.client->ListDevices(&devices).ok());
    ASSERT_EQ(devices.devices_size(), 1);
    EXPECT_TRUE(devices.devices(0).healthy());
    EXPECT_GT(devices.devices(0).measured_copy_bytes_per_second(), 0);
  }
  ExpectNoChildProcesses();
}

TEST(DeviceHost, CrashedHostIsReplacedAndQueuedWorkRuns) {
  {
    TestServer t = StartServer(IsolatedOptions());
    ASSERT_NE(t.client, nullptr);
    const v1::RunRequest crash = FaultRun("fault_crash");
    // The crash and, queued behind it, valid work that must not be lost. A long valid call
    // holds the device until all four are queued, in that order: sent together, the valid
    // calls could arrive after the crash had already taken the device down (and be refused
    // as UNAVAILABLE, never accepted) on a busy machine.
    v1::RunRequest hold = RandomRun(64, 8192, v1::MODE_OUTPUT, 1);
    hold.set_repetitions(10000);
    auto held = std::async(std::launch::async, [&] {
      v1::RunResponse resp;
      return t.client->Run(hold, &resp);
    });
    ASSERT_TRUE(WaitForQueueDepth(*t.client, 1));
    auto crashed = std::async(std::launch::async, [&] {
      v1::RunResponse resp;
      return t.client->Run(crash, &resp);
    });
    ASSERT_TRUE(WaitForQueueDepth(*t.client, 2));
    std::vector<std::future<void>> queued;
    for (unsigned i = 0; i < 3; ++i) {
      queued.push_back(std::async(std::launch::async, [&t, i] {
        ExpectRunMatchesReference(*t.client, v1::MODE_OUTPUT, 100 + i);
      }));
    }
    ASSERT_TRUE(WaitForQueueDepth(*t.client, 5));
    EXPECT_EQ(held.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
        << "the holding call ended before the others were queued";
    EXPECT_TRUE(held.get().ok());
    const grpc::Status s = crashed.get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_NE(s.error_message().find("killed by signal"), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("fault_crash"), std::string::npos) << s.error_message();
    for (auto& f : queued) f.get();
    EXPECT_TRUE(WaitForReadiness(*t.client, true));
    ExpectRunMatchesReference(*t.client, v1::MODE_OUTPUT_AND_RESIDUAL, 3);

    // A second fault on the new host is handled the same way.
    v1::RunResponse resp;
    EXPECT_EQ(t.client->Run(crash, &resp).error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_TRUE(WaitForReadiness(*t.client, true));
    ExpectRunMatchesReference(*t.client, v1::MODE_OUTPUT, 4);
  }
  ExpectNoChildProcesses();
}

TEST(DeviceHost, ReadinessDropsBeforeTheFaultIsAnswered) {
  TestServer t = StartServer(IsolatedOptions());
  ASSERT_NE(t.client, nullptr);
  v1::RunRequest crash = FaultRun("fault_crash");
  v1::RunResponse resp;
  ASSERT_EQ(t.client->Run(crash, &resp).error_code(), grpc::StatusCode::INTERNAL);
  // A host restart takes longer than this check: readiness must already be off.
  bool serving = true;
  ASSERT_TRUE(t.client->HealthCheck("readiness", &serving).ok());
  EXPECT_FALSE(serving);
  EXPECT_TRUE(WaitForReadiness(*t.client, true));
}

TEST(DeviceHost, HungHostIsKilledAfterTheCallTimeout) {
  {
    TestServer t = StartServer(HungHostOptions());
    ASSERT_NE(t.client, nullptr);
    const v1::RunRequest hang = FaultRun("fault_hang");
    v1::RunResponse resp;
    const grpc::Status s = t.client->Run(hang, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_NE(s.error_message().find("no answer within 10 s"), std::string::npos)
        << s.error_message();
    EXPECT_NE(s.error_message().find("killed by signal 9"), std::string::npos) << s.error_message();
    EXPECT_TRUE(WaitForReadiness(*t.client, true));
    ExpectRunMatchesReference(*t.client, v1::MODE_OUTPUT, 5);
  }
  ExpectNoChildProcesses();
}

// The device hosts this process has started, from /proc.
std::vector<pid_t> DeviceHostChildren() {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // pid (comm) state ppid ...: comm is cut to 15 characters.
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos || line.find("(kerneleval-devi") == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid() && state != 'Z') out.push_back(pid);
  }
  return out;
}

TEST(DeviceHost, HostKilledWhileIdleIsReplacedBeforeTheNextRequest) {
  TestServer t = StartServer(IsolatedOptions());
  ASSERT_NE(t.client, nullptr);
  const std::vector<pid_t> hosts = DeviceHostChildren();
  ASSERT_EQ(hosts.size(), 1u);
  ASSERT_EQ(kill(hosts[0], SIGKILL), 0);
  // Seen without any request: a new host starts and readiness returns.
  std::vector<pid_t> now;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    now = DeviceHostChildren();
    if (now.size() == 1 && now[0] != hosts[0]) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], hosts[0]);
  EXPECT_TRUE(WaitForReadiness(*t.client, true));
  ExpectRunMatchesReference(*t.client, v1::MODE_OUTPUT, 6);
}

TEST(DeviceHost, MissingExecutableIsAStartupError) {
  server::ServerOptions o = IsolatedOptions();
  o.device_host_path = "/nonexistent/kerneleval-device-host";
  auto started = server::KernelEvalServer::Start(o);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(started.status().message().find("--device-host"), std::string::npos);
}

TEST(DeviceHost, EveryDeviceGetsItsOwnHost) {
  server::ServerOptions o = IsolatedOptions();
  o.cpu_devices = 2;
  TestServer t = StartServer(o);
  ASSERT_NE(t.client, nullptr);
  // A crash on cpu:0 leaves cpu:1 serving.
  v1::RunRequest crash = FaultRun("fault_crash");
  crash.set_device("cpu:0");
  v1::RunResponse resp;
  EXPECT_EQ(t.client->Run(crash, &resp).error_code(), grpc::StatusCode::INTERNAL);
  v1::RunRequest run = RandomRun(2, 64, v1::MODE_OUTPUT, 9);
  run.set_device("cpu:1");
  const grpc::Status s = t.client->Run(run, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::string out, res;
  ComputeLocally(run, &out, &res);
  EXPECT_EQ(resp.output().data(), out);
}

// The server's device settings reach its device hosts on their command line (no environment
// in between), and the host accepts them: it starts, warms up and measures.
TEST(DeviceHost, GetsTheServersDeviceSettingsOnItsCommandLine) {
  server::DeviceSettings settings;
  settings.disable_cupti = true;
  settings.clock_sample_ms = 7;
  settings.link_spin_us = 123;
  server::ApplyDeviceSettings(settings);
  server::DeviceHostOptions options;
  options.executable = DeviceHostPath();
  auto host = server::ProcessBackend::Launch("cpu", options);
  server::ApplyDeviceSettings({});  // the defaults again, for whatever runs next here
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE((*host)->WarmUp().ok());

  std::ifstream in("/proc/" + std::to_string((*host)->host_pid()) + "/cmdline");
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  EXPECT_NE(cmdline.find(" --disable-cupti "), std::string::npos) << cmdline;
  EXPECT_NE(cmdline.find(" --clock-sample-ms 7 "), std::string::npos) << cmdline;
  EXPECT_NE(cmdline.find(" --link-spin-us 123 "), std::string::npos) << cmdline;
}

}  // namespace
}  // namespace kerneleval::testing
