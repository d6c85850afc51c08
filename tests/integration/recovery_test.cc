// A device fault: the request that hit it gets INTERNAL, readiness turns NOT_SERVING while
// the worker rebuilds the device, queued work waits and then runs, readiness comes back.
// The CPU cannot fault, so a wrapper backend plays a GPU whose context breaks.
#include <atomic>
#include <chrono>
#include <thread>

#include "test_server.h"

namespace kerneleval::testing {
namespace {

class FaultingBackend final : public server::Backend {
 public:
  FaultingBackend() : cpu_("cpu") {}
  const std::string& name() const override { return cpu_.name(); }
  v1::Device Describe() const override { return cpu_.Describe(); }
  std::vector<v1::Implementation> Implementations() const override {
    std::vector<v1::Implementation> impls = cpu_.Implementations();
    v1::Implementation fault;
    fault.set_name("fault");
    fault.set_device_kind("cpu");
    impls.push_back(fault);
    return impls;
  }
  absl::Status WarmUp() override { return cpu_.WarmUp(); }
  absl::StatusOr<server::Measurement> Measure(const server::Problem& p,
                                              const server::HostInputs& in,
                                              const server::HostOutputs& out,
                                              const std::string& impl,
                                              const server::MeasureOptions& o) override {
    if (!healthy_.load()) return absl::UnavailableError("device is recovering");
    if (impl == "fault") {
      healthy_.store(false);
      ReportFault();
      return absl::InternalError("cudaErrorIllegalAddress (simulated)");
    }
    return cpu_.Measure(p, in, out, impl, o);
  }
  double MeasuredCopyBandwidth() const override { return cpu_.MeasuredCopyBandwidth(); }
  v1::Clocks ReadClocks(bool* available) override { return cpu_.ReadClocks(available); }
  bool Healthy() const override { return healthy_.load(); }
  absl::Status Recover() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));  // a context rebuild
    ++recoveries;
    healthy_.store(true);
    return absl::OkStatus();
  }

  std::atomic<int> recoveries{0};

 private:
  server::CpuBackend cpu_;
  std::atomic<bool> healthy_{true};
};

TEST(Recovery, FaultTurnsReadinessOffUntilTheDeviceIsRebuilt) {
  auto backend = std::make_unique<FaultingBackend>();
  FaultingBackend* raw = backend.get();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::move(backend));
  TestServer t = StartServer(LoopbackOptions(), std::move(backends));
  ASSERT_NE(t.client, nullptr);

  v1::RunRequest fault = SmallRun(2, 4);
  fault.set_implementation("fault");
  v1::RunResponse resp;
  const grpc::Status s = t.client->Run(fault, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(s.error_message().find("IllegalAddress"), std::string::npos);

  // Readiness is off while the device is rebuilt.
  bool serving = true;
  ASSERT_TRUE(t.client->HealthCheck("readiness", &serving).ok());
  EXPECT_FALSE(serving);

  // New work is refused while not ready, and served again once the device is back.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(t.client->HealthCheck("readiness", &serving).ok());
    if (serving) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(serving);
  EXPECT_EQ(raw->recoveries.load(), 1);
  const grpc::Status ok = t.client->Run(SmallRun(2, 4), &resp);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

}  // namespace
}  // namespace kerneleval::testing
