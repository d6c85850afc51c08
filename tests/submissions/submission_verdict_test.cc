// A submission is a submission however a request names it: through a real server on
// loopback, the real client and real kerneleval-compile processes. The server's device is a
// CPU that presents itself as a CUDA device and runs a registered submission as a kernel
// that ignores its inputs and returns another tenant's data: what the server decides about
// a submission (who may name it, under which checks, what the caller gets back) is the
// same whatever runs it, and is what these tests look at.
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/submit_client.h"
#include "client/tensors.h"
#include "played_gpu_backend.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;

// What "another tenant's data" looks like in the outputs: a pattern no check would pass.
constexpr unsigned char kLeaked = 0x3c;

// A CUDA device to the server; a submission it runs writes another tenant's data.
class LeakingGpu final : public PlayedGpu {
 public:
  v1::Device Describe() const override {
    v1::Device d = PlayedGpu::Describe();
    d.set_kind("cuda");
    return d;
  }
  // Loaded submissions listed as test-only implementations, as the device hosts once did:
  // the server must not take a device's list for permission to run one.
  std::vector<v1::Implementation> Implementations() const override {
    std::vector<v1::Implementation> impls = PlayedGpu::Implementations();
    for (v1::Implementation& i : impls) i.set_device_kind("cuda");
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& id : loaded_) {
      v1::Implementation& i = impls.emplace_back();
      i.set_name(id);
      i.set_device_kind("cuda");
      i.set_test_only(true);
    }
    return impls;
  }
  absl::Status AddSubmission(const server::SubmittedKernel& kernel) override {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_.insert(kernel.submission.id());
    return absl::OkStatus();
  }
  absl::StatusOr<server::Measurement> Measure(const server::Problem& p,
                                              const server::HostInputs& in,
                                              const server::HostOutputs& out,
                                              const std::string& impl,
                                              const server::MeasureOptions& o) override {
    bool submitted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      submitted = loaded_.count(impl) > 0;
    }
    server::MeasureOptions cpu_options = o;
    cpu_options.check_calls = false;  // the CPU backend checks no calls; recorded below
    cpu_options.timer = v1::TIMER_UNSPECIFIED;
    if (!submitted) {
      if (o.check_calls) ++builtin_calls_checked;
      return PlayedGpu::Measure(p, in, out, impl, cpu_options);
    }
    (o.check_calls ? submission_runs_checked : submission_runs_unchecked)++;
    absl::StatusOr<server::Measurement> m =
        PlayedGpu::Measure(p, in, out, cpu().DefaultImplementation(), cpu_options);
    if (!m.ok()) return m;
    if (out.output != nullptr) std::memset(out.output, kLeaked, p.TensorBytes());
    if (o.check_calls) m->calls_checked = o.warmup + o.repetitions;
    return m;
  }

  std::atomic<int> submission_runs_checked{0};
  std::atomic<int> submission_runs_unchecked{0};
  std::atomic<int> builtin_calls_checked{0};

 private:
  mutable std::mutex mu_;
  std::set<std::string> loaded_;
};

constexpr char kSource[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void leaky(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";

struct Fixture : SubmissionsServer {
  LeakingGpu* gpu = nullptr;
  std::string id;  // the registered submission's
};

// Two owners, each with a token of its own; the fixture's clients are alice's.
constexpr char kTokens[] = "alice:token-of-alice\nbob:token-of-bob\n";

Fixture Start() {
  server::ServerOptions o = SubmissionOptions();
  o.auth_token = kTokens;
  auto gpu = std::make_unique<LeakingGpu>();
  LeakingGpu* played = gpu.get();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::move(gpu));
  client::ClientOptions c;
  c.bearer_token = "token-of-alice";
  Fixture f{StartSubmissionsServer(o, c, std::move(backends))};
  f.gpu = played;
  const v1::SubmissionSpec spec = OneKernelSpec("leaky", kSource, "leaky", v1::DTYPE_BF16, 256);
  v1::RegisterSubmissionResponse registered;
  const grpc::Status s = f.submissions->Register(spec, &registered);
  EXPECT_TRUE(s.ok()) << s.error_message();
  f.id = registered.submission().id();
  return f;
}

v1::RunRequest Bf16Run(const std::string& implementation) {
  v1::RunRequest run;
  *run.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_BF16, {4, 256}, 11);
  *run.mutable_residual() = client::RandomTensor(v1::DTYPE_BF16, {4, 256}, 12);
  *run.mutable_weight() = client::RandomTensor(v1::DTYPE_BF16, {256}, 13);
  run.set_implementation(implementation);
  run.set_repetitions(3);
  return run;
}

TEST(SubmissionVerdict, ByNameOrByIdTheSameChecksAndNoOutputsFromAFailedCheck) {
  Fixture f = Start();
  ASSERT_FALSE(f.id.empty());
  for (const std::string& named : {std::string("leaky"), f.id}) {
    SCOPED_TRACE(named);
    v1::RunResponse r;
    const grpc::Status s = f.server.client->Run(Bf16Run(named), &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    // Checked although the request did not ask, failed, and nothing of what the kernel
    // wrote comes back.
    EXPECT_TRUE(r.correctness().checked());
    EXPECT_FALSE(r.correctness().passed());
    EXPECT_THAT(r.correctness().detail(), HasSubstr("outputs withheld"));
    EXPECT_TRUE(r.output().data().empty());
    EXPECT_TRUE(r.residual_out().data().empty());
    EXPECT_EQ(r.implementation(), f.id);
  }
  EXPECT_EQ(f.gpu->submission_runs_unchecked.load(), 0);
  // Each Run: the measurement and verification rounds until the first failure.
  EXPECT_GE(f.gpu->submission_runs_checked.load(), 4);
}

TEST(SubmissionVerdict, AnotherOwnerCannotNameItByNameOrById) {
  Fixture f = Start();
  v1::RunResponse r;
  ASSERT_TRUE(f.server.client->Run(Bf16Run(f.id), &r).ok());  // loaded on the device now
  client::ClientOptions c;
  c.target = f.server.target();
  c.bearer_token = "token-of-bob";
  c.deadline_seconds = 120;
  std::unique_ptr<client::KernelEvalClient> bob;
  ASSERT_TRUE(client::KernelEvalClient::Create(c, &bob).ok());
  for (const std::string& named : {std::string("leaky"), f.id}) {
    SCOPED_TRACE(named);
    const grpc::Status s = bob->Run(Bf16Run(named), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    v1::BenchmarkRequest bench;
    *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {2}, 256);
    bench.add_implementations(named);
    const grpc::Status b = bob->Benchmark(bench, [](const v1::BenchmarkEvent&) {});
    EXPECT_EQ(b.error_code(), grpc::StatusCode::NOT_FOUND) << b.error_message();
  }
  std::shared_ptr<grpc::Channel> channel;
  ASSERT_TRUE(client::MakeChannel(c, &channel).ok());
  client::SubmissionsClient bobs(channel, c);
  v1::ListSubmissionsResponse listed;
  ASSERT_TRUE(bobs.List(&listed).ok());
  EXPECT_EQ(listed.submissions_size(), 0);
  v1::DeleteSubmissionResponse deleted;
  EXPECT_EQ(bobs.Delete(f.id, &deleted).error_code(), grpc::StatusCode::NOT_FOUND);
  // Still alice's, still runnable by her.
  EXPECT_TRUE(f.server.client->Run(Bf16Run(f.id), &r).ok());
}

TEST(SubmissionVerdict, TheDeviceListNeverShowsASubmissionAndDeleteRevokesIt) {
  Fixture f = Start();
  v1::RunResponse r;
  ASSERT_TRUE(f.server.client->Run(Bf16Run("leaky"), &r).ok());  // loaded on the device now
  v1::ListImplementationsResponse listed;
  ASSERT_TRUE(f.server.client->ListImplementations("", &listed).ok());
  for (const v1::Implementation& impl : listed.implementations()) {
    EXPECT_NE(impl.name(), f.id);
  }
  v1::DeleteSubmissionResponse deleted;
  ASSERT_TRUE(f.submissions->Delete(f.id, &deleted).ok());
  for (const std::string& named : {std::string("leaky"), f.id}) {
    SCOPED_TRACE(named);
    const grpc::Status s = f.server.client->Run(Bf16Run(named), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    v1::BenchmarkRequest bench;
    *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {2}, 256);
    bench.add_implementations(named);
    const grpc::Status b = f.server.client->Benchmark(bench, [](const v1::BenchmarkEvent&) {});
    EXPECT_EQ(b.error_code(), grpc::StatusCode::NOT_FOUND) << b.error_message();
  }
}

TEST(SubmissionVerdict, BuiltinsRankedBesideASubmissionGetTheSameChecks) {
  Fixture f = Start();
  v1::BenchmarkRequest bench;
  *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 3}, 256);
  bench.add_implementations("cpu_fused");
  bench.add_implementations(f.id);
  bench.mutable_protocol()->set_repetitions(3);
  bench.mutable_protocol()->set_warmup(1);
  v1::BenchmarkReport report;
  const grpc::Status s = f.server.client->Benchmark(bench, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(report.protocol().check_every_call());
  EXPECT_GT(f.gpu->builtin_calls_checked.load(), 0);
  EXPECT_EQ(f.gpu->submission_runs_unchecked.load(), 0);
  for (const v1::WorkloadResult& w : report.results()) {
    if (w.implementation() == f.id) {
      EXPECT_NE(w.status(), v1::RESULT_STATUS_PASSED) << w.workload();
    } else {
      EXPECT_EQ(w.status(), v1::RESULT_STATUS_PASSED) << w.workload() << " " << w.error();
    }
  }
  for (const v1::ImplementationSummary& summary : report.summaries()) {
    if (summary.implementation() == f.id) EXPECT_EQ(summary.rank(), 0u);
  }
}

}  // namespace
}  // namespace kerneleval::testing
