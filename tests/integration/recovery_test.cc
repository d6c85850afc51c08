// A device fault, step by step: the request that hit it gets INTERNAL, readiness turns
// NOT_SERVING while the worker rebuilds the device, new work for the device is refused with
// UNAVAILABLE naming it, work queued behind the fault waits and then runs, readiness comes
// back. The CPU cannot fault, so a wrapper backend plays a GPU whose context breaks, with
// gates that hold the fault and the rebuild until the test has made its checks.
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "client/tensors.h"
#include "played_gpu_backend.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A GPU whose context breaks on `fault`, with gates that hold the fault and the rebuild until
// the test has made its checks.
class FaultingBackend final : public PlayedGpu {
 public:
  std::vector<v1::Implementation> Implementations() const override {
    return CpuImplementationsAnd("fault", /*test_only=*/false);
  }
  absl::StatusOr<server::Measurement> Measure(const server::Problem& p,
                                              const server::HostInputs& in,
                                              const server::HostOutputs& out,
                                              const std::string& impl,
                                              const server::MeasureOptions& o) override {
    if (!Healthy()) {
      ++measured_while_broken;
      return absl::UnavailableError("device is recovering");
    }
    if (impl == "fault") {
      fault_running.Open();
      if (!release_fault.Wait()) return absl::InternalError("the test never released the fault");
      return Fault();
    }
    return PlayedGpu::Measure(p, in, out, impl, o);
  }
  absl::Status Recover() override {
    recovering.Open();
    release_recovery.Wait();  // the context rebuild, held until the test has looked
    ++recoveries;
    Repaired();
    return absl::OkStatus();
  }

  Gate fault_running, release_fault, recovering, release_recovery;
  std::atomic<int> recoveries{0};
  std::atomic<int> measured_while_broken{0};
};

v1::RunRequest RandomRun(std::uint64_t seed) {
  v1::RunRequest run;
  *run.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_FP32, {3, 40}, seed);
  *run.mutable_residual() = client::RandomTensor(v1::DTYPE_FP32, {3, 40}, seed + 1);
  *run.mutable_weight() = client::RandomTensor(v1::DTYPE_FP32, {40}, seed + 2);
  return run;
}

std::uint32_t QueueDepth(const client::KernelEvalClient& client) {
  v1::ListDevicesResponse devices;
  if (!client.ListDevices(&devices).ok() || devices.devices_size() != 1) return 0;
  return devices.devices(0).queue_depth();
}

TEST(Recovery, FaultRefusesNewWorkRunsQueuedWorkAndRestoresReadiness) {
  auto backend = std::make_unique<FaultingBackend>();
  FaultingBackend* raw = backend.get();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::move(backend));
  TestServer t = StartServer(LoopbackOptions(), std::move(backends));
  ASSERT_NE(t.client, nullptr);
  v1::RunRequest fault = SmallRun(2, 4);
  fault.set_implementation("fault");
  const v1::RunRequest queued = RandomRun(31);
  v1::RunResponse fault_resp, queued_resp;
  std::future<grpc::Status> faulted, queued_done;
  // Whatever happens below, no gate stays shut past the test: declared after the calls in
  // flight, this opens the gates before their futures wait for them.
  struct OpenAll {
    FaultingBackend* b;
    ~OpenAll() {
      b->release_fault.Open();
      b->release_recovery.Open();
    }
  } open_all{raw};

  // 1. The fault starts on the device and is held there.
  faulted = std::async(std::launch::async, [&] { return t.client->Run(fault, &fault_resp); });
  ASSERT_TRUE(raw->fault_running.Wait());

  // 2. Work queued behind it (the running fault and this job: depth 2).
  queued_done = std::async(std::launch::async, [&] { return t.client->Run(queued, &queued_resp); });
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (QueueDepth(*t.client) < 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(QueueDepth(*t.client), 2u);

  // 3. The fault answers INTERNAL; the worker starts rebuilding and is held there.
  raw->release_fault.Open();
  const grpc::Status s = faulted.get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  EXPECT_NE(s.error_message().find("IllegalAddress"), std::string::npos) << s.error_message();
  ASSERT_TRUE(raw->recovering.Wait());

  // 4. While the device is rebuilt: readiness is off, new work for it is UNAVAILABLE naming
  // it, work without a device finds no healthy one, and the queued job has not run.
  bool serving = true;
  ASSERT_TRUE(t.client->HealthCheck("readiness", &serving).ok());
  EXPECT_FALSE(serving);
  v1::RunRequest named = RandomRun(41);
  named.set_device("cpu");
  v1::RunResponse resp;
  const grpc::Status refused = t.client->Run(named, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_NE(refused.error_message().find("'cpu'"), std::string::npos) << refused.error_message();
  const grpc::Status unnamed = t.client->Run(RandomRun(51), &resp);
  EXPECT_EQ(unnamed.error_code(), grpc::StatusCode::UNAVAILABLE) << unnamed.error_message();
  EXPECT_EQ(queued_done.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);

  // 5. The device is back: the queued job ran on the healthy device and is right, readiness
  // returns, new work is served.
  raw->release_recovery.Open();
  const grpc::Status queued_status = queued_done.get();
  ASSERT_TRUE(queued_status.ok()) << queued_status.error_message();
  EXPECT_EQ(CompareWithReference(queued, queued_resp), "");
  EXPECT_EQ(raw->measured_while_broken.load(), 0);
  EXPECT_EQ(raw->recoveries.load(), 1);
  const auto ready_by = Clock::now() + std::chrono::seconds(60);
  do {
    ASSERT_TRUE(t.client->HealthCheck("readiness", &serving).ok());
    if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (!serving && Clock::now() < ready_by);
  EXPECT_TRUE(serving);
  const v1::RunRequest after = RandomRun(61);
  const grpc::Status ok = t.client->Run(after, &resp);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(CompareWithReference(after, resp), "");
}

}  // namespace
}  // namespace kerneleval::testing
