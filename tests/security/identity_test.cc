// Identities from the outside: a token file of two owners on a real server on loopback,
// driven through gRPC's own stubs on ONE channel, so that calls with different tokens share
// a connection (where gRPC's auth context would carry one call's identity into the next).
// Submissions compile in real kerneleval-compile processes (NVRTC needs no GPU); results
// are planted in the server's SQLite file through a second ResultStore.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kerneleval/v1/results.grpc.pb.h"
#include "kerneleval/v1/submissions.grpc.pb.h"
#include "server/identity/token_file.h"
#include "server/store/result_store.h"
#include "store_test_helpers.h"
#include "two_owners.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

TEST(TokenFile, OwnersCommentsBlankLinesAndTheBareForm) {
  auto parsed =
      server::ParseTokenFile("# who may call\n\nalice:tok-A\n  bob.x@lab-1 : tok-B  \n\t\n# end\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].owner, "alice");
  EXPECT_EQ((*parsed)[0].token, "tok-A");
  EXPECT_EQ((*parsed)[1].owner, "bob.x@lab-1");
  EXPECT_EQ((*parsed)[1].token, "tok-B");
  // The file of earlier releases: one token, owner "token" (what every caller was then).
  auto bare = server::ParseTokenFile("s3cret\n");
  ASSERT_TRUE(bare.ok()) << bare.status();
  ASSERT_EQ(bare->size(), 1u);
  EXPECT_EQ((*bare)[0].owner, "token");
  EXPECT_EQ((*bare)[0].token, "s3cret");
}

TEST(TokenFile, RefusedFilesNameTheLineAndNeverTheToken) {
  struct Case {
    std::string text, message;
  };
  const std::string long_owner(65, 'a');
  for (const Case& c : std::vector<Case>{
           {"alice:SECRET-1\nbob:SECRET-1\n", "line 2: the token of 'bob' is the token of line 1"},
           {"alice:SECRET-1\n# x\nalice:SECRET-2\n",
            "line 3: owner 'alice' was given a token on "
            "line 1"},
           {"SECRET-1\nSECRET-2\n", "line 2: owner 'token' was given a token on line 1"},
           {"\nal ice:SECRET-1\n", "line 2: owner 'al ice' has a character outside"},
           {"al/ice:SECRET-1\n", "line 1: owner 'al/ice' has a character outside"},
           {":SECRET-1\n", "line 1: owner '' is not 1 to 64 characters"},
           {long_owner + ":SECRET-1\n", "line 1: owner 'aaaa"},
           {"alice:\n", "line 1: the token of 'alice' is not 1 to 4096 characters"},
           {"alice:SECRET 1\n", "line 1: the token of 'alice' has a space"},
           {"# nobody\n\n", "no token in the file"},
           {"", "no token in the file"},
       }) {
    SCOPED_TRACE(c.text);
    auto parsed = server::ParseTokenFile(c.text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.message));
    EXPECT_THAT(parsed.status().message(), HasSubstr("--auth-token-file"));
    EXPECT_THAT(parsed.status().message(), Not(HasSubstr("SECRET")));
  }
}

TEST(TokenFile, AServerWithABadFileDoesNotStart) {
  server::ServerOptions o = LoopbackOptions();
  o.auth_token = std::string("alice:") + kAliceToken + "\nbob:" + kAliceToken + "\n";
  std::vector<std::unique_ptr<server::Backend>> cpu;
  cpu.push_back(std::make_unique<server::CpuBackend>("cpu"));
  auto started = server::KernelEvalServer::Start(o, std::move(cpu));
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(started.status().message(), HasSubstr("--auth-token-file line 2"));
  EXPECT_THAT(started.status().message(), Not(HasSubstr(kAliceToken)));
}

// A server of two owners, submissions on, results in a SQLite file of its own.
class TwoOwners : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("identity-" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    server::ServerOptions o = LoopbackOptions();
    AdmitAliceAndBob(&o);
    o.submissions.enabled = true;
    o.submissions.compiler.tool_path = KERNELEVAL_TEST_COMPILE_TOOL;
    o.results.data_dir = dir_;
    client::ClientOptions client_options;
    client_options.bearer_token = kAliceToken;
    server_ = StartServer(o, {}, client_options);
    ASSERT_NE(server_.server, nullptr);
    channel_ = grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials());
    submissions_ = v1::Submissions::NewStub(channel_);
    results_ = v1::Results::NewStub(channel_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // kTinySource under `name`; `scale` makes other content (an owner holds each content once).
  grpc::Status Register(const char* token, const std::string& name, v1::Submission* out,
                        int scale = 1) {
    v1::RegisterSubmissionRequest request;
    v1::SubmissionSpec* spec = request.mutable_submission();
    spec->set_name(name);
    std::string source = kTinySource;
    source.replace(source.find("p.eps;"), 6, "p.eps * " + std::to_string(scale) + ".0f;");
    spec->set_source(source);
    spec->set_dtype(v1::DTYPE_BF16);
    v1::KernelLaunch* k = spec->mutable_launch_plan()->add_kernels();
    k->set_entry("tiny");
    k->set_block_size(256);
    k->set_rows_per_block(1);
    v1::RegisterSubmissionResponse response;
    const grpc::Status s = submissions_->RegisterSubmission(As(token).get(), request, &response);
    if (out != nullptr) *out = response.submission();
    return s;
  }

  // The names of `token`'s submissions, with their owners ("name@owner").
  std::set<std::string> Listed(const char* token) {
    v1::ListSubmissionsResponse response;
    const grpc::Status s = submissions_->ListSubmissions(As(token).get(), {}, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::set<std::string> names;
    for (const v1::Submission& sub : response.submissions()) {
      names.insert(sub.spec().name() + "@" + sub.owner());
    }
    return names;
  }

  // The implementations of suite "synthetic" in `token`'s history.
  std::multiset<std::string> HistoryOf(const char* token) {
    v1::HistoryRequest request;
    request.mutable_filter()->set_suite("synthetic");
    request.set_page_size(1000);
    v1::HistoryResponse response;
    const grpc::Status s = results_->History(As(token).get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::multiset<std::string> implementations;
    for (const v1::StoredResult& r : response.results()) {
      implementations.insert(r.result().implementation());
    }
    return implementations;
  }

  std::string dir_;
  TestServer server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Submissions::Stub> submissions_;
  std::unique_ptr<v1::Results::Stub> results_;
};

TEST_F(TwoOwners, EachOwnerListsOnlyItsOwnSubmissions) {
  v1::Submission alices, bobs;
  ASSERT_TRUE(Register(kAliceToken, "mine", &alices).ok());
  ASSERT_TRUE(Register(kBobToken, "mine", &bobs).ok());  // names are unique per owner
  EXPECT_EQ(alices.owner(), "alice");
  EXPECT_EQ(bobs.owner(), "bob");
  const grpc::Status second = Register(kAliceToken, "only-alice", nullptr, 2);
  ASSERT_TRUE(second.ok()) << second.error_message();
  // Interleaved on one connection: each call is the owner of its own token.
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(Listed(kAliceToken), UnorderedElementsAre("mine@alice", "only-alice@alice"));
    EXPECT_THAT(Listed(kBobToken), UnorderedElementsAre("mine@bob"));
  }
  v1::GetSubmissionRequest get;
  get.set_submission("only-alice");
  v1::GetSubmissionResponse got;
  EXPECT_TRUE(submissions_->GetSubmission(As(kAliceToken).get(), get, &got).ok());
  EXPECT_EQ(submissions_->GetSubmission(As(kBobToken).get(), get, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::DeleteSubmissionRequest del;
  del.set_submission("only-alice");
  v1::DeleteSubmissionResponse deleted;
  EXPECT_EQ(submissions_->DeleteSubmission(As(kBobToken).get(), del, &deleted).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(Listed(kAliceToken), UnorderedElementsAre("mine@alice", "only-alice@alice"));
}

TEST_F(TwoOwners, AWrongOrMissingTokenIsRefused) {
  v1::ListSubmissionsResponse response;
  const grpc::Status wrong =
      submissions_->ListSubmissions(As("alice-SECRET-7f3a9d").get(), {}, &response);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(wrong.error_message(), Not(HasSubstr("SECRET")));
  // An owner's name is not its token.
  EXPECT_EQ(submissions_->ListSubmissions(As("alice").get(), {}, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(submissions_->ListSubmissions(As(nullptr).get(), {}, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::HistoryResponse history;
  EXPECT_EQ(results_->History(As("bob-SECRET-41d8e3").get(), {}, &history).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // No metadata makes a caller someone else (the server runs re-runs as their caller, through
  // the core, and keeps no mark a call could forge).
  auto forged = As(kBobToken);
  forged->AddMetadata("kerneleval-internal-key", std::string(64, '0'));
  forged->AddMetadata("kerneleval-internal-caller-bin", "alice");
  EXPECT_EQ(submissions_->ListSubmissions(forged.get(), {}, &response).error_code(),
            grpc::StatusCode::OK);
  for (const v1::Submission& s : response.submissions()) EXPECT_EQ(s.owner(), "bob");
}

// A synthetic report (two workloads) of one implementation.
v1::BenchmarkReport ReportOf(const std::string& implementation) {
  v1::BenchmarkReport report = SyntheticReport(7, 10e-6, 0.02, 40);
  for (v1::WorkloadResult& r : *report.mutable_results()) r.set_implementation(implementation);
  return report;
}

TEST_F(TwoOwners, ResultsOfAnotherOwnersSubmissionsAreLeftOut) {
  v1::Submission alices;
  ASSERT_TRUE(Register(kAliceToken, "mine", &alices).ok());
  const std::string alice_sub = alices.id();
  const std::string bob_sub = "sub-bbbbbbbbbbbbbbbbbbbbbbbb";
  std::string alice_run, bob_run, builtin_run;
  {
    // The server's own file, through a second connection.
    server::store::StoreOptions so;
    so.data_dir = dir_;
    auto store = server::store::ResultStore::Open(so, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    alice_run = *(*store)->RecordNow(ReportOf(alice_sub), 1000, "alice");
    bob_run = *(*store)->RecordNow(ReportOf(bob_sub), 2000, "bob");
    builtin_run = *(*store)->RecordNow(ReportOf("cpu_fused"), 3000, "bob");
  }

  EXPECT_THAT(HistoryOf(kAliceToken),
              UnorderedElementsAre(alice_sub, alice_sub, "cpu_fused", "cpu_fused"));
  EXPECT_THAT(HistoryOf(kBobToken),
              UnorderedElementsAre(bob_sub, bob_sub, "cpu_fused", "cpu_fused"));

  v1::LeaderboardRequest board;
  board.set_suite("synthetic");
  for (const auto& [token, own] :
       {std::pair<const char*, std::string>{kAliceToken, alice_sub}, {kBobToken, bob_sub}}) {
    v1::LeaderboardResponse response;
    ASSERT_TRUE(results_->Leaderboard(As(token).get(), board, &response).ok());
    std::vector<std::string> ranked;
    for (const auto& e : response.entries()) ranked.push_back(e.implementation());
    EXPECT_THAT(ranked, UnorderedElementsAre(own, "cpu_fused")) << token;
  }

  v1::ExportRequest export_request;
  export_request.mutable_filter()->set_suite("synthetic");
  export_request.set_format(v1::EXPORT_FORMAT_JSONL);
  v1::ExportResponse exported;
  ASSERT_TRUE(results_->Export(As(kAliceToken).get(), export_request, &exported).ok());
  EXPECT_EQ(exported.rows(), 4u);
  EXPECT_THAT(exported.data(), HasSubstr(alice_sub));
  EXPECT_THAT(exported.data(), Not(HasSubstr(bob_sub)));

  // Compare: another owner's run is as absent as a run that never was.
  v1::CompareRequest compare;
  compare.set_baseline_run(bob_run);
  compare.set_candidate_run(bob_run);
  v1::CompareResponse compared;
  EXPECT_TRUE(results_->Compare(As(kBobToken).get(), compare, &compared).ok());
  const grpc::Status hidden = results_->Compare(As(kAliceToken).get(), compare, &compared);
  EXPECT_EQ(hidden.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(hidden.error_message(), HasSubstr("no stored results"));

  // Reproduce: another owner's result is NOT_FOUND like a missing id ...
  v1::ReproduceRequest reproduce;
  v1::ReproduceResponse reproduced;
  reproduce.set_result_id(alice_run + "/0");
  const grpc::Status bobs_try = results_->Reproduce(As(kBobToken).get(), reproduce, &reproduced);
  EXPECT_EQ(bobs_try.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(bobs_try.error_message(), HasSubstr("no stored result"));
  // ... and the owner's re-run resolves its submission as the owner's: found, then refused
  // only because this server has no GPU (as anyone else, the name would be NOT_FOUND).
  const grpc::Status alices_try =
      results_->Reproduce(As(kAliceToken).get(), reproduce, &reproduced);
  EXPECT_EQ(alices_try.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << alices_try.error_message();
  EXPECT_THAT(alices_try.error_message(), HasSubstr("needs a CUDA device"));
  // A built-in's result is everyone's, and its re-run passes the token check in-process.
  reproduce.set_result_id(builtin_run + "/0");
  const grpc::Status builtin = results_->Reproduce(As(kAliceToken).get(), reproduce, &reproduced);
  EXPECT_TRUE(builtin.ok()) << builtin.error_message();
  EXPECT_EQ(reproduced.reproduced().implementation(), "cpu_fused");
}

// bob's custom suite: a free-text name and description, results of a built-in and a
// workload named like a spreadsheet formula.
v1::BenchmarkReport BobsCustomSuite() {
  v1::BenchmarkReport report = ReportOf("cpu_fused");
  report.set_suite("bob-secret-suite");
  report.mutable_definition()->set_name("bob-secret-suite");
  report.mutable_definition()->set_description("bob's plan: SECRET-DESCRIPTION");
  report.mutable_results(0)->set_workload("=HYPERLINK(\"http://x.invalid\",\"open\")");
  return report;
}

TEST_F(TwoOwners, AnotherOwnersCustomSuiteIsNeitherSuggestedNorDescribed) {
  {
    server::store::StoreOptions so;
    so.data_dir = dir_;
    auto store = server::store::ResultStore::Open(so, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->RecordNow(BobsCustomSuite(), 1000, "bob").ok());
  }
  v1::HistoryRequest typo;
  typo.mutable_filter()->set_suite("bob-secret-suit");
  v1::HistoryResponse history;
  const grpc::Status alices = results_->History(As(kAliceToken).get(), typo, &history);
  EXPECT_EQ(alices.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(alices.error_message(), Not(HasSubstr("bob-secret-suite")));
  EXPECT_THAT(alices.error_message(), Not(HasSubstr("did you mean")));
  // Its owner still gets the suggestion; the served suites are everyone's to suggest.
  const grpc::Status bobs = results_->History(As(kBobToken).get(), typo, &history);
  EXPECT_EQ(bobs.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(bobs.error_message(), HasSubstr("did you mean 'bob-secret-suite'?"));
  v1::LeaderboardRequest board;
  board.set_suite("fused_add_rmsnorm_h204");
  v1::LeaderboardResponse ranked;
  const grpc::Status served = results_->Leaderboard(As(kAliceToken).get(), board, &ranked);
  EXPECT_THAT(served.error_message(), HasSubstr("did you mean 'fused_add_rmsnorm_h2048'?"));
  board.set_suite("bob-secret-suit");
  const grpc::Status hidden = results_->Leaderboard(As(kAliceToken).get(), board, &ranked);
  EXPECT_EQ(hidden.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(hidden.error_message(), Not(HasSubstr("bob-secret-suite")));

  // The built-in's results of bob's run are everyone's, but his description is not.
  v1::HistoryRequest exact;
  exact.mutable_filter()->set_suite("bob-secret-suite");
  for (const auto& [token, sees] : {std::pair{kAliceToken, false}, std::pair{kBobToken, true}}) {
    ASSERT_TRUE(results_->History(As(token).get(), exact, &history).ok());
    ASSERT_EQ(history.results_size(), 2) << token;
    for (const v1::StoredResult& r : history.results()) {
      EXPECT_EQ(r.receipt().definition().description().empty(), !sees) << token;
    }
  }
}

TEST_F(TwoOwners, AWorkloadNamedLikeAFormulaExportsAsText) {
  {
    server::store::StoreOptions so;
    so.data_dir = dir_;
    auto store = server::store::ResultStore::Open(so, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->RecordNow(BobsCustomSuite(), 1000, "bob").ok());
  }
  v1::ExportRequest request;
  request.mutable_filter()->set_suite("bob-secret-suite");
  request.set_format(v1::EXPORT_FORMAT_CSV);
  v1::ExportResponse exported;
  ASSERT_TRUE(results_->Export(As(kAliceToken).get(), request, &exported).ok());
  // One quote before the formula (OWASP), then RFC 4180's quoting of the cell.
  EXPECT_THAT(exported.data(),
              HasSubstr(",\"'=HYPERLINK(\"\"http://x.invalid\"\",\"\"open\"\")\","));
  EXPECT_THAT(exported.data(), Not(HasSubstr(",=HYPERLINK")));
  EXPECT_THAT(exported.data(), Not(HasSubstr(",\"=HYPERLINK")));
}

// The Benchmark caller's owner reaches the row through the store's writer thread.
TEST(ResultOwner, RecordedReportsKeepTheirOwner) {
  const std::string dir = TempDir("identity-record");
  server::store::StoreOptions so;
  so.data_dir = dir;
  auto store = server::store::ResultStore::Open(so, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string sub = "sub-cccccccccccccccccccccccc";
  (*store)->Record(ReportOf(sub), "carol");
  (*store)->Record(ReportOf("cpu_fused"), "dave");
  (*store)->Flush();
  v1::HistoryRequest request;
  request.mutable_filter()->set_suite("synthetic");
  auto count = [&](const server::store::Viewer& viewer) {
    auto h = (*store)->History(request, viewer);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? h->results_size() : -1;
  };
  EXPECT_EQ(count(std::string("carol")), 4);
  EXPECT_EQ(count(std::string("dave")), 2);
  EXPECT_EQ(count(std::string("")), 2);  // no owner sees no one's submissions
  EXPECT_EQ(count(std::nullopt), 4);     // the store itself sees all
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerneleval::testing
