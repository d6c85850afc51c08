// Owners apart in the compile path, from the outside: a real server on loopback with a token
// file of two owners, compiling in real kerneleval-compile processes (NVRTC needs no GPU).
//   - Fairness (server/submissions/compile_queue.h): one owner's queue of slow sources does not
//     hold another owner's honest compile behind all of them (FIFO once held a 0.2 s compile
//     for 118 s), only behind the compile running when it came.
//   - The cache (server/submissions/compiler.h) is per owner: an owner never learns from
//     `cache_hit` or from a fast answer that another owner compiled the same source.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kerneleval/v1/submissions.grpc.pb.h"
#include "submissions_test_server.h"
#include "two_owners.h"

namespace kerneleval::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Three instantiations per level, memoized by nothing: the front end spins until the
// compile's CPU limit ends it. `salt` makes each source other content.
std::string SlowSource(int salt) {
  return "#include <kerneleval/submission_abi.h>\n"
         "template <int N, int M> struct A {\n"
         "  static constexpr long v = A<N - 1, M>::v + A<N - 1, M + 1>::v + A<N - 2, M * 3>::v;\n"
         "};\n"
         "template <int M> struct A<0, M> { static constexpr long v = M; };\n"
         "template <int M> struct A<-1, M> { static constexpr long v = 1; };\n"
         "extern \"C\" __global__ void spin(const kerneleval_params p) {\n"
         "  static_cast<long*>(p.output)[0] = A<60, " +
         std::to_string(salt) + ">::v;\n}\n";
}

class CompileIsolation : public ::testing::Test {
 protected:
  void Start(server::ServerOptions o) {
    AdmitAliceAndBob(&o);
    server_ = StartServer(o);
    ASSERT_NE(server_.server, nullptr);
    stub_ = v1::Submissions::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Register(const char* token, const v1::SubmissionSpec& spec,
                        v1::RegisterSubmissionResponse* response = nullptr) {
    v1::RegisterSubmissionRequest request;
    *request.mutable_submission() = spec;
    v1::RegisterSubmissionResponse ignored;
    return stub_->RegisterSubmission(As(token, std::chrono::seconds(600)).get(), request,
                                     response ? response : &ignored);
  }

  TestServer server_;
  std::unique_ptr<v1::Submissions::Stub> stub_;
};

TEST_F(CompileIsolation, AnotherOwnersSlowCompilesHoldAnHonestOneForAtMostOne) {
  server::ServerOptions o = SubmissionOptions();
  o.submissions.compile_workers = 1;
  o.submissions.max_compiles_per_owner = 0;  // alice may queue them all
  o.submissions.compiler.cpu_seconds = 2;
  o.submissions.compiler.wall_seconds = 60;  // the CPU limit ends them, however busy the host
  Start(o);
  constexpr int kSlow = 5;
  std::mutex mu;
  std::vector<Clock::time_point> alice_done;
  std::vector<std::thread> alice;
  for (int i = 0; i < kSlow; ++i) {
    alice.emplace_back([&, i] {
      const grpc::Status s = Register(
          kAliceToken,
          OneKernelSpec("spin" + std::to_string(i), SlowSource(i), "spin", v1::DTYPE_BF16, 256));
      EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
      std::lock_guard<std::mutex> lock(mu);
      alice_done.push_back(Clock::now());
    });
  }
  // Every one of alice's is queued (the first running, for at least its 2 CPU-seconds).
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const Clock::time_point bob_sent = Clock::now();
  const grpc::Status bobs =
      Register(kBobToken, OneKernelSpec("honest", kTinySource, "tiny", v1::DTYPE_BF16, 256));
  const Clock::time_point bob_done = Clock::now();
  for (std::thread& t : alice) t.join();
  ASSERT_TRUE(bobs.ok()) << bobs.error_message();
  // With one worker, bob's compile is next once the one running as it came ends: at most
  // that one of alice's finishes first (FIFO: all five). One more is room for a host so
  // busy that the first had not started within the second.
  const auto before_bob = std::count_if(alice_done.begin(), alice_done.end(),
                                        [&](Clock::time_point t) { return t < bob_done; });
  EXPECT_LE(before_bob, 2) << "bob waited "
                           << std::chrono::duration<double>(bob_done - bob_sent).count() << " s";
}

TEST_F(CompileIsolation, TheCacheAnswersAnOwnersOwnCompilesOnly) {
  Start(SubmissionOptions());
  auto timed = [&](const char* token, const v1::SubmissionSpec& spec,
                   v1::RegisterSubmissionResponse* r) {
    const Clock::time_point t0 = Clock::now();
    const grpc::Status s = Register(token, spec, r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  v1::RegisterSubmissionResponse r;
  timed(kAliceToken, OneKernelSpec("first", kTinySource, "tiny", v1::DTYPE_BF16, 256), &r);
  EXPECT_FALSE(r.submission().diagnostics().cache_hit());
  // Alice's own cache works: the same source under other launch plans, answered fast.
  double alice_cached = 1e9;
  for (std::uint32_t block : {128u, 512u, 1024u}) {
    const std::string name = "again" + std::to_string(block);
    alice_cached = std::min(
        alice_cached,
        timed(kAliceToken, OneKernelSpec(name, kTinySource, "tiny", v1::DTYPE_BF16, block), &r));
    EXPECT_TRUE(r.submission().diagnostics().cache_hit()) << block;
  }
  // Bob's compile of the same source is a compile: no hit, and the time of one.
  const double bobs =
      timed(kBobToken, OneKernelSpec("same", kTinySource, "tiny", v1::DTYPE_BF16, 256), &r);
  EXPECT_FALSE(r.submission().diagnostics().cache_hit()) << "bob learns alice compiled it";
  EXPECT_EQ(r.submission().owner(), "bob");
  EXPECT_GT(bobs, 2 * alice_cached) << "bob's answer came as fast as a cached one";
  // And then his own cache answers him.
  timed(kBobToken, OneKernelSpec("same128", kTinySource, "tiny", v1::DTYPE_BF16, 128), &r);
  EXPECT_TRUE(r.submission().diagnostics().cache_hit());
}

}  // namespace
}  // namespace kerneleval::testing
