// Submissions a fleet shares: two real servers on loopback (CPU devices; NVRTC compiles need no
// GPU) on one real PostgreSQL (with_postgres.sh; skipped without it). Registered through A,
// found through B; deleted through A, gone on B; one owner never sees another's, on either.
// While the database is down, a list is UNAVAILABLE, never an empty answer.
#include <chrono>
#include <cstdlib>
#include <thread>

#include <gmock/gmock.h>

#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kTiny[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";
constexpr char kTokens[] = "alice:alice-token-5b1e\nbob:bob-token-77c2\n";

v1::SubmissionSpec Tiny(const std::string& name, float scale = 1) {
  std::string source = kTiny;
  if (scale != 1) source += "// variant " + std::to_string(scale) + "\n";
  return OneKernelSpec(name, source, "tiny", v1::DTYPE_BF16, 256);
}

server::ServerOptions FleetOptions(const char* url, const std::string& node) {
  server::ServerOptions o = SubmissionOptions();
  o.results.results_db = url;
  o.node_name = node;
  o.auth_token = kTokens;
  return o;
}

client::ClientOptions As(const std::string& token) {
  client::ClientOptions c;
  c.bearer_token = token;
  return c;
}

// A Submissions client of `token` on the server `s` runs.
std::unique_ptr<client::SubmissionsClient> ClientOn(const SubmissionsServer& s,
                                                    const std::string& token) {
  client::ClientOptions c = As(token);
  c.target = s.server.target();
  c.deadline_seconds = 120;
  std::shared_ptr<grpc::Channel> channel;
  EXPECT_TRUE(client::MakeChannel(c, &channel).ok());
  return std::make_unique<client::SubmissionsClient>(channel, c);
}

TEST(SubmissionsFleet, RegisteredThroughOneServerFoundAndDeletedThroughAnother) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  const SubmissionsServer a =
      StartSubmissionsServer(FleetOptions(url, "server-a"), As("alice-token-5b1e"));
  const SubmissionsServer b =
      StartSubmissionsServer(FleetOptions(url, "server-b"), As("alice-token-5b1e"));
  ASSERT_NE(a.server.server, nullptr);
  ASSERT_NE(b.server.server, nullptr);

  v1::RegisterSubmissionResponse registered;
  const grpc::Status r = a.submissions->Register(Tiny("mine"), &registered);
  ASSERT_TRUE(r.ok()) << r.error_message();
  const std::string id = registered.submission().id();
  EXPECT_EQ(registered.submission().owner(), "alice");

  // B finds it by name and by id, with its source, and lists it.
  v1::GetSubmissionResponse got;
  grpc::Status s = b.submissions->Get("mine", &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got.submission().id(), id);
  EXPECT_EQ(got.submission().spec().source(), Tiny("mine").source());
  ASSERT_TRUE(b.submissions->Get(id, &got).ok());
  v1::ListSubmissionsResponse listed;
  ASSERT_TRUE(b.submissions->List(&listed).ok());
  ASSERT_EQ(listed.submissions_size(), 1);
  EXPECT_EQ(listed.submissions(0).id(), id);
  // Registering the same content again through B is the same submission; other content
  // under the name is refused as on one server.
  v1::RegisterSubmissionResponse again;
  ASSERT_TRUE(b.submissions->Register(Tiny("mine"), &again).ok());
  EXPECT_EQ(again.submission().id(), id);
  s = b.submissions->Register(Tiny("mine", 2), &again);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.name: 'mine'"));

  // Bob, on either server, sees none of alice's.
  for (const SubmissionsServer* server : {&a, &b}) {
    const auto bob = ClientOn(*server, "bob-token-77c2");
    v1::ListSubmissionsResponse bobs;
    ASSERT_TRUE(bob->List(&bobs).ok());
    EXPECT_EQ(bobs.submissions_size(), 0);
    EXPECT_EQ(bob->Get(id, &got).error_code(), grpc::StatusCode::NOT_FOUND);
    v1::DeleteSubmissionResponse none;
    EXPECT_EQ(bob->Delete("mine", &none).error_code(), grpc::StatusCode::NOT_FOUND);
  }

  // Deleted through A: gone through B at once, by id and by name, and the name is free.
  v1::DeleteSubmissionResponse deleted;
  ASSERT_TRUE(a.submissions->Delete("mine", &deleted).ok());
  EXPECT_EQ(deleted.id(), id);
  EXPECT_EQ(b.submissions->Get(id, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(b.submissions->Get("mine", &got).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(b.submissions->List(&listed).ok());
  EXPECT_EQ(listed.submissions_size(), 0);
  EXPECT_EQ(b.submissions->Delete(id, &deleted).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::RegisterSubmissionResponse renamed;
  ASSERT_TRUE(b.submissions->Register(Tiny("mine", 2), &renamed).ok());
  EXPECT_NE(renamed.submission().id(), id);
  ASSERT_TRUE(a.submissions->Get("mine", &got).ok());
  EXPECT_EQ(got.submission().id(), renamed.submission().id());
}

// The cluster stopped under a running server (with_postgres.sh's KERNELEVAL_TEST_POSTGRES_STOP
// / _START): the owner's list and lookups say the database is unavailable, as a caller can
// retry, instead of an empty list or NOT_FOUND; once it is back they answer as before.
TEST(SubmissionsFleet, WhileTheDatabaseIsDownAListIsUnavailableNotEmpty) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  const char* stop = std::getenv("KERNELEVAL_TEST_POSTGRES_STOP");
  const char* start = std::getenv("KERNELEVAL_TEST_POSTGRES_START");
  if (url == nullptr || stop == nullptr || start == nullptr) {
    GTEST_SKIP() << "run by with_postgres.sh";
  }
  const SubmissionsServer a =
      StartSubmissionsServer(FleetOptions(url, "server-a"), As("alice-token-5b1e"));
  ASSERT_NE(a.server.server, nullptr);
  v1::RegisterSubmissionResponse registered;
  const grpc::Status r = a.submissions->Register(Tiny("kept"), &registered);
  ASSERT_TRUE(r.ok()) << r.error_message();

  ASSERT_EQ(std::system(stop), 0);
  v1::ListSubmissionsResponse listed;
  const grpc::Status down = a.submissions->List(&listed);
  EXPECT_EQ(down.error_code(), grpc::StatusCode::UNAVAILABLE) << down.error_message();
  EXPECT_EQ(listed.submissions_size(), 0);
  v1::GetSubmissionResponse got;
  const grpc::Status lookup = a.submissions->Get("kept", &got);
  EXPECT_EQ(lookup.error_code(), grpc::StatusCode::UNAVAILABLE) << lookup.error_message();

  ASSERT_EQ(std::system(start), 0);
  grpc::Status back;
  for (int i = 0; i < 300; ++i) {  // the pool reconnects on its next use
    listed.Clear();
    back = a.submissions->List(&listed);
    if (back.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(back.ok()) << back.error_message();
  // The database is the whole test binary's: the other test's submission may be there too.
  bool found = false;
  for (const v1::Submission& listed_one : listed.submissions()) {
    found |= listed_one.id() == registered.submission().id();
  }
  EXPECT_TRUE(found) << listed.DebugString();
  v1::DeleteSubmissionResponse deleted;
  EXPECT_TRUE(a.submissions->Delete("kept", &deleted).ok());
}

}  // namespace
}  // namespace kerneleval::testing
