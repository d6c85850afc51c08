// Backend::capabilities(): one answer to "does this device support that?", computed once per
// backend, and one wording for each refusal whether a server's admission or the backend
// itself refuses.
#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/device/backend.h"
#include "server/device/cpu_backend.h"
#include "test_server.h"

namespace kerneleval::server {
namespace {

// A CPU backend that counts how often it is described.
class CountingBackend final : public Backend {
 public:
  const std::string& name() const override { return cpu_.name(); }
  v1::Device Describe() const override {
    ++described_;
    return cpu_.Describe();
  }
  std::vector<v1::Implementation> Implementations() const override {
    return cpu_.Implementations();
  }
  absl::Status WarmUp() override { return cpu_.WarmUp(); }
  absl::StatusOr<Measurement> Measure(const Problem& p, const HostInputs& in,
                                      const HostOutputs& out, const std::string& impl,
                                      const MeasureOptions& o) override {
    return cpu_.Measure(p, in, out, impl, o);
  }
  double MeasuredCopyBandwidth() const override { return cpu_.MeasuredCopyBandwidth(); }
  v1::Clocks ReadClocks(bool* available) override { return cpu_.ReadClocks(available); }

  int described() const { return described_.load(); }

 private:
  CpuBackend cpu_{"cpu"};
  mutable std::atomic<int> described_{0};
};

TEST(Capabilities, AreComputedOnceNotOnEveryQuestion) {
  CountingBackend backend;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(backend.kind(), "cpu");
    EXPECT_FALSE(backend.IsGpu());
    EXPECT_FALSE(backend.capabilities().graph_replay);
  }
  EXPECT_EQ(backend.described(), 1);
}

TEST(Capabilities, FollowTheDeviceKind) {
  const Capabilities cpu = CapabilitiesOfKind("cpu");
  EXPECT_FALSE(cpu.gpu);
  EXPECT_TRUE(cpu.SupportsTimer(v1::TIMER_HOST_CLOCK));
  EXPECT_TRUE(cpu.SupportsTimer(v1::TIMER_UNSPECIFIED));
  EXPECT_FALSE(cpu.SupportsTimer(v1::TIMER_CUDA_EVENTS));
  EXPECT_FALSE(cpu.SupportsTimer(v1::TIMER_CUPTI));
  EXPECT_FALSE(cpu.graph_replay || cpu.call_checks || cpu.submissions || cpu.profiles);

  const Capabilities gpu = CapabilitiesOfKind("cuda");
  EXPECT_TRUE(gpu.gpu);
  EXPECT_TRUE(gpu.SupportsTimer(v1::TIMER_CUPTI));
  EXPECT_TRUE(gpu.SupportsTimer(v1::TIMER_CUDA_EVENTS));
  EXPECT_FALSE(gpu.SupportsTimer(v1::TIMER_HOST_CLOCK));
  EXPECT_TRUE(gpu.graph_replay && gpu.call_checks && gpu.submissions && gpu.profiles);

  const absl::Status host_on_gpu =
      CheckTimer(gpu, v1::TIMER_HOST_CLOCK, "cuda:0", "protocol.timer");
  EXPECT_EQ(host_on_gpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host_on_gpu.message(), "protocol.timer: host_clock is for the CPU backend, not cuda:0");
  const absl::Status submission = CheckSubmissions(cpu, "sub-1", "cpu", "implementation");
  EXPECT_EQ(submission.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(submission.message().find("needs a CUDA device, not cpu"), std::string::npos);
}

// What the server refuses at admission and what the CPU backend refuses when called directly
// are the same words: one check answers both.
TEST(Capabilities, TheServerAndTheBackendRefuseInTheSameWords) {
  testing::TestServer t = testing::StartServer();
  ASSERT_NE(t.client, nullptr);
  CpuBackend cpu("cpu");
  ASSERT_TRUE(cpu.WarmUp().ok());
  Problem p;
  p.dtype = DType::kFP32;
  p.batch = 1;
  p.hidden = 8;
  const std::vector<float> x(8, 1.0f), r(8, 1.0f), w(8, 1.0f);

  struct Case {
    const char* what;
    void (*set)(v1::Protocol*, MeasureOptions*);
    grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
    const char* field = "";
  };
  const std::vector<Case> cases = {
      {"graph", [](v1::Protocol* p, MeasureOptions* o) { p->set_cuda_graph(o->graph = true); }},
      {"checks",
       [](v1::Protocol* p, MeasureOptions* o) { p->set_check_every_call(o->check_calls = true); }},
      {"timer",
       [](v1::Protocol* p, MeasureOptions* o) { p->set_timer(o->timer = v1::TIMER_CUDA_EVENTS); }},
      // A valid request the device cannot serve: it has no counters.
      {"profile", [](v1::Protocol* p, MeasureOptions* o) { p->set_profile(o->profile = true); },
       grpc::StatusCode::FAILED_PRECONDITION, "protocol.profile: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::BenchmarkRequest req;
    req.set_suite("fused_add_rmsnorm_h2048");
    MeasureOptions options;
    c.set(req.mutable_protocol(), &options);
    const grpc::Status served = t.client->Benchmark(req, [](const v1::BenchmarkEvent&) {});
    const absl::StatusOr<Measurement> direct =
        cpu.Measure(p, {x.data(), r.data(), w.data()}, {}, cpu.DefaultImplementation(), options);
    ASSERT_FALSE(direct.ok());
    EXPECT_EQ(served.error_code(), c.code);
    EXPECT_EQ(static_cast<int>(direct.status().code()), static_cast<int>(c.code));
    EXPECT_EQ(served.error_message(), direct.status().message());
    EXPECT_EQ(served.error_message().rfind(c.field, 0), 0u) << served.error_message();
  }
}

}  // namespace
}  // namespace kerneleval::server
