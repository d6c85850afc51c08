// Whose context runs what: through a real server on loopback, the real client and real
// kerneleval-compile processes, a GPU's backend is the server's own TenantBackend, and the
// device host and each tenant host it starts are CPUs presenting themselves as CUDA devices
// that record what ran on them. The oracle is that record: owner A's submission ran in a
// host started for A alone, B's in another, built-ins in the device's own host, whatever
// the submission ids say.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/submit_client.h"
#include "client/tensors.h"
#include "server/device/tenant_backend.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// What ran where: "<host>:<implementation>", in order.
struct RunLog {
  std::mutex mu;
  std::vector<std::string> runs;
  std::vector<std::string> hosts_ended;
  void Add(const std::string& host, const std::string& impl) {
    std::lock_guard<std::mutex> lock(mu);
    runs.push_back(host + ":" + impl);
  }
  std::vector<std::string> Runs() {
    std::lock_guard<std::mutex> lock(mu);
    return runs;
  }
  std::vector<std::string> Ended() {
    std::lock_guard<std::mutex> lock(mu);
    return hosts_ended;
  }
};

// A host: a CPU that says it is a CUDA device. A submission it loaded runs as the CPU's
// default implementation (correct, so that every check passes); one named "faulty" faults
// the host as a sticky CUDA error would.
class RecordingHost final : public server::Backend {
 public:
  RecordingHost(std::string label, bool takes_submissions, std::shared_ptr<RunLog> log)
      : label_(std::move(label)),
        takes_submissions_(takes_submissions),
        log_(std::move(log)),
        cpu_("cpu") {}
  ~RecordingHost() override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->hosts_ended.push_back(label_);
  }
  const std::string& name() const override { return cpu_.name(); }
  v1::Device Describe() const override {
    v1::Device d = cpu_.Describe();
    d.set_kind("cuda");
    d.set_healthy(healthy_.load());
    return d;
  }
  std::vector<v1::Implementation> Implementations() const override {
    std::vector<v1::Implementation> impls = cpu_.Implementations();
    for (v1::Implementation& i : impls) i.set_device_kind("cuda");
    return impls;
  }
  absl::Status WarmUp() override { return cpu_.WarmUp(); }
  absl::Status AddSubmission(const server::SubmittedKernel& kernel) override {
    if (!takes_submissions_) return Backend::AddSubmission(kernel);  // the device's own host
    std::lock_guard<std::mutex> lock(mu_);
    loaded_[kernel.submission.id()] = kernel.submission.spec().name();
    return absl::OkStatus();
  }
  absl::StatusOr<server::Measurement> Measure(const server::Problem& p,
                                              const server::HostInputs& in,
                                              const server::HostOutputs& out,
                                              const std::string& impl,
                                              const server::MeasureOptions& o) override {
    log_->Add(label_, impl);
    server::MeasureOptions cpu_options = o;
    cpu_options.check_calls = false;
    cpu_options.timer = v1::TIMER_UNSPECIFIED;
    std::string submitted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = loaded_.find(impl);
      if (it != loaded_.end()) submitted = it->second;
    }
    if (submitted.empty()) return cpu_.Measure(p, in, out, impl, cpu_options);
    if (submitted == "faulty") {
      healthy_ = false;
      return absl::InternalError("cuda:0: the device faulted while running " + impl);
    }
    absl::StatusOr<server::Measurement> m =
        cpu_.Measure(p, in, out, cpu_.DefaultImplementation(), cpu_options);
    if (m.ok() && o.check_calls) m->calls_checked = o.warmup + o.repetitions;
    return m;
  }
  double MeasuredCopyBandwidth() const override { return cpu_.MeasuredCopyBandwidth(); }
  v1::Clocks ReadClocks(bool* available) override { return cpu_.ReadClocks(available); }
  bool Healthy() const override { return healthy_.load(); }

 private:
  const std::string label_;
  const bool takes_submissions_;
  const std::shared_ptr<RunLog> log_;
  server::CpuBackend cpu_;
  std::atomic<bool> healthy_{true};
  mutable std::mutex mu_;
  std::map<std::string, std::string> loaded_;  // id -> submission name
};

constexpr char kTokens[] = "alice:token-of-alice\nbob:token-of-bob\ncarol:token-of-carol\n";

// Byte for byte the same for every owner: one content, one submission id.
constexpr char kSource[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void rows(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";

struct Fixture {
  TestServer server;
  std::shared_ptr<RunLog> log = std::make_shared<RunLog>();
  server::TenantBackend* gpu = nullptr;
  std::map<std::string, std::unique_ptr<client::KernelEvalClient>> clients;  // by owner
  std::map<std::string, std::string> ids;  // "<owner>/<name>" -> id

  client::KernelEvalClient& As(const std::string& owner) { return *clients.at(owner); }
};

std::string Register(const std::string& target, const std::string& owner, const std::string& name) {
  client::ClientOptions c;
  c.target = target;
  c.bearer_token = "token-of-" + owner;
  c.deadline_seconds = 120;
  std::shared_ptr<grpc::Channel> channel;
  EXPECT_TRUE(client::MakeChannel(c, &channel).ok());
  client::SubmissionsClient submissions(channel, c);
  v1::SubmissionSpec spec;
  spec.set_name(name);
  // Any name but "rows" differs by a comment: another content, another id.
  spec.set_source(name == "rows" ? std::string(kSource)
                                 : std::string(kSource) + "// " + name + "\n");
  spec.set_dtype(v1::DTYPE_BF16);
  v1::KernelLaunch* k = spec.mutable_launch_plan()->add_kernels();
  k->set_entry("rows");
  k->set_block_size(256);
  k->set_rows_per_block(1);
  v1::RegisterSubmissionResponse registered;
  const grpc::Status s = submissions.Register(spec, &registered);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return registered.submission().id();
}

Fixture Start(server::TenantHostOptions hosts = {}) {
  server::ServerOptions o = LoopbackOptions();
  o.submissions.enabled = true;
  o.submissions.compiler.tool_path = KERNELEVAL_TEST_COMPILE_TOOL;
  o.auth_token = kTokens;
  Fixture f;
  auto started = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<RunLog> log = f.log;
  auto gpu = std::make_unique<server::TenantBackend>(
      std::make_unique<RecordingHost>("device", /*takes_submissions=*/false, log),
      [log,
       started](const std::string& tenant) -> absl::StatusOr<std::unique_ptr<server::Backend>> {
        // Labelled by owner and start: a replaced host is a new one.
        const std::string label = tenant + "#" + std::to_string(++*started);
        return std::make_unique<RecordingHost>(label, /*takes_submissions=*/true, log);
      },
      hosts);
  f.gpu = gpu.get();
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::move(gpu));
  client::ClientOptions c;
  c.bearer_token = "token-of-alice";
  f.server = StartServer(o, std::move(backends), c);
  for (const std::string owner : {"alice", "bob", "carol"}) {
    c.target = f.server.target();
    c.bearer_token = "token-of-" + owner;
    c.deadline_seconds = 120;
    EXPECT_TRUE(client::KernelEvalClient::Create(c, &f.clients[owner]).ok());
    for (const std::string name : {"rows", "faulty"}) {
      f.ids[owner + "/" + name] = Register(f.server.target(), owner, name);
    }
  }
  return f;
}

v1::RunRequest Bf16Run(const std::string& implementation) {
  v1::RunRequest run;
  *run.mutable_hidden_states() = client::RandomTensor(v1::DTYPE_BF16, {4, 256}, 11);
  *run.mutable_residual() = client::RandomTensor(v1::DTYPE_BF16, {4, 256}, 12);
  *run.mutable_weight() = client::RandomTensor(v1::DTYPE_BF16, {256}, 13);
  run.set_implementation(implementation);
  run.set_repetitions(2);
  run.set_check_correctness(true);
  return run;
}

// The hosts that ran `impl`, each once, in order of first use.
std::vector<std::string> HostsThatRan(const std::vector<std::string>& runs,
                                      const std::string& impl) {
  std::vector<std::string> hosts;
  for (const std::string& r : runs) {
    const std::size_t colon = r.rfind(':');
    if (r.substr(colon + 1) != impl) continue;
    const std::string host = r.substr(0, colon);
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

void RunOk(Fixture& f, const std::string& owner, const std::string& impl) {
  v1::RunResponse r;
  const grpc::Status s = f.As(owner).Run(Bf16Run(impl), &r);
  ASSERT_TRUE(s.ok()) << owner << " " << impl << ": " << s.error_message();
  EXPECT_TRUE(r.correctness().passed()) << r.correctness().detail();
}

TEST(Tenants, EachOwnersSubmissionsRunInItsOwnHostAndBuiltinsInTheDevicesOwn) {
  Fixture f = Start();
  // One content, two owners: the same id, which must not decide where it runs.
  const std::string id = f.ids.at("alice/rows");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(f.ids.at("bob/rows"), id);

  RunOk(f, "alice", "rows");
  RunOk(f, "bob", id);
  RunOk(f, "alice", "cpu_fused");
  RunOk(f, "alice", id);
  RunOk(f, "bob", "rows");
  const std::vector<std::string> runs = f.log->Runs();
  EXPECT_THAT(HostsThatRan(runs, id), ElementsAre("alice#1", "bob#2"));
  EXPECT_THAT(HostsThatRan(runs, "cpu_fused"), ElementsAre("device"));
  // Every call of a submission ran in its owner's host (the measurement and each
  // verification round), never in another's.
  std::size_t alice = 0, bob = 0;
  for (const std::string& r : runs) {
    if (r == "alice#1:" + id) ++alice;
    if (r == "bob#2:" + id) ++bob;
  }
  EXPECT_GE(alice, 2 * (1 + 3u)) << "two Runs of a measurement and verification rounds";
  EXPECT_GE(bob, 2 * (1 + 3u));
  EXPECT_EQ(f.gpu->hosts_started(), 2u);
  EXPECT_THAT(f.gpu->Tenants(), ElementsAre("bob", "alice"));
}

TEST(Tenants, ABenchmarkRunsBuiltinsInTheDevicesHostAndEachSubmissionInItsOwners) {
  Fixture f = Start();
  v1::BenchmarkRequest bench;
  *bench.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 3}, 256);
  bench.add_implementations("cpu_fused");
  bench.add_implementations("rows");
  bench.mutable_protocol()->set_repetitions(2);
  bench.mutable_protocol()->set_warmup(1);
  v1::BenchmarkReport report;
  const grpc::Status s = f.As("bob").Benchmark(bench, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  ASSERT_TRUE(s.ok()) << s.error_message();
  for (const v1::WorkloadResult& w : report.results()) {
    EXPECT_EQ(w.status(), v1::RESULT_STATUS_PASSED) << w.implementation() << " " << w.error();
  }
  const std::vector<std::string> runs = f.log->Runs();
  EXPECT_THAT(HostsThatRan(runs, f.ids.at("bob/rows")), ElementsAre("bob#1"));
  EXPECT_THAT(HostsThatRan(runs, "cpu_fused"), ElementsAre("device"));
}

TEST(Tenants, AtMostNHostsTheLeastRecentlyUsedStopsFirst) {
  server::TenantHostOptions hosts;
  hosts.max_hosts = 2;
  Fixture f = Start(hosts);
  const std::string id = f.ids.at("alice/rows");
  RunOk(f, "alice", id);  // alice#1
  RunOk(f, "bob", id);    // bob#2
  RunOk(f, "alice", id);  // alice#1 again: bob is now the least recently used
  EXPECT_THAT(f.log->Ended(), ElementsAre());
  RunOk(f, "carol", id);  // carol#3 stops bob#2
  EXPECT_THAT(f.log->Ended(), ElementsAre("bob#2"));
  EXPECT_THAT(f.gpu->Tenants(), ElementsAre("carol", "alice"));
  RunOk(f, "bob", id);  // bob#4 stops alice#1
  EXPECT_THAT(f.log->Ended(), ElementsAre("bob#2", "alice#1"));
  EXPECT_THAT(HostsThatRan(f.log->Runs(), id), ElementsAre("alice#1", "bob#2", "carol#3", "bob#4"));
  EXPECT_EQ(f.gpu->hosts_started(), 4u);
}

TEST(Tenants, AnIdleHostIsStopped) {
  server::TenantHostOptions hosts;
  hosts.idle_seconds = 0.3;
  Fixture f = Start(hosts);
  RunOk(f, "alice", "rows");
  EXPECT_THAT(f.gpu->Tenants(), ElementsAre("alice"));
  for (int i = 0; i < 100 && !f.gpu->Tenants().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(f.gpu->Tenants(), ElementsAre());
  EXPECT_THAT(f.log->Ended(), ElementsAre("alice#1"));
  RunOk(f, "alice", "rows");  // a new one
  EXPECT_THAT(f.gpu->Tenants(), ElementsAre("alice"));
  EXPECT_EQ(f.gpu->hosts_started(), 2u);
}

TEST(Tenants, AFaultInATenantHostEndsThatHostOnlyAndTheDeviceKeepsServing) {
  Fixture f = Start();
  RunOk(f, "bob", "rows");  // bob#1
  v1::RunResponse r;
  const grpc::Status s = f.As("alice").Run(Bf16Run("faulty"), &r);  // alice#2 faults
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("faulted"));
  EXPECT_THAT(f.log->Ended(), ElementsAre("alice#2"));
  // Readiness never dropped, the device is healthy, built-ins and bob's host serve on.
  EXPECT_TRUE(f.server.server->WaitUntilReady(absl::Milliseconds(1)));
  EXPECT_TRUE(f.gpu->Healthy());
  RunOk(f, "alice", "cpu_fused");
  RunOk(f, "bob", "rows");
  RunOk(f, "alice", "rows");  // alice#3
  const std::vector<std::string> runs = f.log->Runs();
  EXPECT_THAT(HostsThatRan(runs, "cpu_fused"), ElementsAre("device"));
  EXPECT_THAT(HostsThatRan(runs, f.ids.at("bob/rows")), ElementsAre("bob#1", "alice#3"));
}

// Deleted, a submission leaves the device: its owner's host, the only place it was loaded,
// is stopped; another owner's host keeps the same content (the same id) loaded.
TEST(Tenants, ADeletedSubmissionIsUnloadedFromItsOwnersHostOnly) {
  Fixture f = Start();
  const std::string id = f.ids.at("alice/rows");
  RunOk(f, "alice", "rows");  // alice#1
  RunOk(f, "bob", "rows");    // bob#2
  EXPECT_THAT(f.gpu->LoadedSubmissions("alice"), ElementsAre(id));
  EXPECT_THAT(f.gpu->LoadedSubmissions("bob"), ElementsAre(id));
  client::ClientOptions c;
  c.target = f.server.target();
  c.bearer_token = "token-of-alice";
  c.deadline_seconds = 120;
  std::shared_ptr<grpc::Channel> channel;
  ASSERT_TRUE(client::MakeChannel(c, &channel).ok());
  client::SubmissionsClient submissions(channel, c);
  v1::DeleteSubmissionResponse deleted;
  const grpc::Status s = submissions.Delete("rows", &deleted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(deleted.id(), id);
  EXPECT_THAT(f.log->Ended(), ElementsAre("alice#1"));
  EXPECT_THAT(f.gpu->LoadedSubmissions("alice"), ElementsAre());
  EXPECT_THAT(f.gpu->LoadedSubmissions("bob"), ElementsAre(id));
  EXPECT_THAT(f.gpu->Tenants(), ElementsAre("bob"));
  v1::RunResponse r;
  EXPECT_EQ(f.As("alice").Run(Bf16Run("rows"), &r).error_code(), grpc::StatusCode::NOT_FOUND);
  RunOk(f, "bob", "rows");  // still bob#2
  EXPECT_THAT(HostsThatRan(f.log->Runs(), id), ElementsAre("alice#1", "bob#2"));
}

// A module unused for the idle time leaves with its host at the owner's next job, even
// while another of the owner's modules keeps the host busy; the new host loads only what
// runs.
TEST(Tenants, AModuleUnusedForTheIdleTimeIsUnloadedAtTheNextJob) {
  server::TenantHostOptions hosts;
  hosts.idle_seconds = 0.5;
  Fixture f = Start(hosts);
  const std::string other = Register(f.server.target(), "alice", "other");
  const std::string rows = f.ids.at("alice/rows");
  RunOk(f, "alice", "other");  // alice#1
  RunOk(f, "alice", "rows");
  EXPECT_THAT(f.gpu->LoadedSubmissions("alice"), UnorderedElementsAre(other, rows));
  // Jobs of "rows" only, less than the idle time apart: the host itself is never idle.
  for (int i = 0; i < 100 && f.log->Ended().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RunOk(f, "alice", "rows");
  }
  EXPECT_THAT(f.log->Ended(), ElementsAre("alice#1"));
  EXPECT_THAT(f.gpu->LoadedSubmissions("alice"), ElementsAre(rows));
  EXPECT_THAT(HostsThatRan(f.log->Runs(), rows), ElementsAre("alice#1", "alice#2"));
}

TEST(Tenants, TheDevicesHostRunsNoSubmittedCode) {
  // A measurement of a submission id that names no owner never reaches the device's host.
  auto log = std::make_shared<RunLog>();
  server::TenantBackend gpu(
      std::make_unique<RecordingHost>("device", false, log),
      [log](const std::string& t) -> absl::StatusOr<std::unique_ptr<server::Backend>> {
        return std::make_unique<RecordingHost>(t, true, log);
      });
  ASSERT_TRUE(gpu.WarmUp().ok());
  server::Problem p;
  p.batch = 1;
  p.hidden = 8;
  std::vector<unsigned char> in(64, 0), out(64, 0);
  const absl::StatusOr<server::Measurement> m =
      gpu.Measure(p, {in.data(), in.data(), in.data()}, {out.data(), nullptr}, "sub-0123", {});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  server::SubmittedKernel ownerless;
  ownerless.submission.set_id("sub-0123");
  EXPECT_EQ(gpu.AddSubmission(ownerless).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(log->Runs(), ElementsAre());
}

}  // namespace
}  // namespace kerneleval::testing
