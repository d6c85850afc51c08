// A leaderboard means one thing: the results under a suite's name are those of that very
// suite content. A custom suite cannot take a served suite's name with other content, and
// runs stored under an official name with other content (a store shared with a server of
// another suite version, a hand-written report) stay off its leaderboard. And a board ranks
// one protocol: a hot run never stands beside a cold one.
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kerneleval/v1/results.grpc.pb.h"
#include "request_helpers.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;

TEST(LeaderboardIdentity, ACustomSuiteCannotTakeAServedSuitesName) {
  TestServer t = StartServer();
  v1::ListSuitesResponse suites;
  ASSERT_TRUE(t.client->ListSuites(&suites).ok());
  ASSERT_GT(suites.suites_size(), 0);
  const v1::SuiteDefinition official = suites.suites(0);

  // Tolerances loosened: the content differs, so the name is refused.
  v1::BenchmarkRequest request;
  *request.mutable_custom_suite() = SmallSuite(v1::DTYPE_FP32, {2}, 64);
  request.mutable_custom_suite()->set_name(official.name());
  request.add_implementations("cpu_unfused");
  const grpc::Status s = t.client->Benchmark(request, [](const v1::BenchmarkEvent&) {});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("custom_suite.name"));

  // The served content itself under its own name is that suite.
  v1::BenchmarkRequest same;
  *same.mutable_custom_suite() = official;
  same.add_implementations("no_such_implementation");  // refused before anything runs
  const grpc::Status named = t.client->Benchmark(same, [](const v1::BenchmarkEvent&) {});
  EXPECT_EQ(named.error_code(), grpc::StatusCode::NOT_FOUND) << named.error_message();
}

TEST(LeaderboardIdentity, RunsOfOtherContentUnderAnOfficialNameAreNotRanked) {
  const v1::SuiteDefinition official = SmallSuite("synthetic");
  v1::SuiteDefinition forged = official;
  (*forged.mutable_workloads(0)->mutable_tolerance()).set_atol(1000);

  server::store::StoreOptions o;
  o.data_dir = TempDir("leaderboard-identity");
  o.official_suite_hashes["synthetic"] = server::store::SuiteHash(official);
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();

  v1::BenchmarkReport honest = SyntheticReport(1, 10e-6, 0.02);
  v1::BenchmarkReport poisoned = SyntheticReport(2, 1e-6, 0.02);  // ten times faster
  *poisoned.mutable_definition() = forged;
  for (v1::WorkloadResult& r : *poisoned.mutable_results()) r.set_implementation("cheat");
  const absl::StatusOr<std::string> honest_run = (*store)->RecordNow(honest, 1000);
  ASSERT_TRUE(honest_run.ok()) << honest_run.status();
  ASSERT_TRUE((*store)->RecordNow(poisoned, 2000).ok());

  v1::LeaderboardRequest request;
  request.set_suite("synthetic");
  const absl::StatusOr<v1::LeaderboardResponse> board = (*store)->Leaderboard(request);
  ASSERT_TRUE(board.ok()) << board.status();
  ASSERT_EQ(board->entries_size(), 1);
  EXPECT_EQ(board->entries(0).implementation(), "fused");
  EXPECT_EQ(board->entries(0).run_id(), *honest_run);
}

TEST(LeaderboardIdentity, ACustomSuiteRanksOnlyRunsOfItsNewestContent) {
  server::store::StoreOptions o;
  o.data_dir = TempDir("leaderboard-custom");
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  v1::BenchmarkReport older = SyntheticReport(1, 1e-6, 0.02);
  (*older.mutable_definition()->mutable_workloads(0)->mutable_tolerance()).set_atol(1000);
  for (v1::WorkloadResult& r : *older.mutable_results()) r.set_implementation("old");
  ASSERT_TRUE((*store)->RecordNow(older, 1000).ok());
  const v1::BenchmarkReport newer = SyntheticReport(2, 10e-6, 0.02);
  ASSERT_TRUE((*store)->RecordNow(newer, 2000).ok());

  v1::LeaderboardRequest request;
  request.set_suite("synthetic");
  const absl::StatusOr<v1::LeaderboardResponse> board = (*store)->Leaderboard(request);
  ASSERT_TRUE(board.ok()) << board.status();
  ASSERT_EQ(board->entries_size(), 1);
  EXPECT_EQ(board->entries(0).implementation(), "fused");
}

}  // namespace
}  // namespace kerneleval::testing

namespace kerneleval::testing {
namespace {

TEST(LeaderboardIdentity, ACustomSuiteNameIsItsOwnersBoard) {
  server::store::StoreOptions o;
  o.data_dir = TempDir("leaderboard-owners");
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  const v1::BenchmarkReport alices = SyntheticReport(1, 10e-6, 0.02);
  ASSERT_TRUE((*store)->RecordNow(alices, 1000, "alice").ok());
  // Later, bob stores other content under the same name, and a faster result with it.
  v1::BenchmarkReport bobs = SyntheticReport(2, 1e-6, 0.02);
  (*bobs.mutable_definition()->mutable_workloads(0)->mutable_tolerance()).set_atol(1000);
  for (v1::WorkloadResult& r : *bobs.mutable_results()) r.set_implementation("bobs");
  ASSERT_TRUE((*store)->RecordNow(bobs, 2000, "bob").ok());

  v1::LeaderboardRequest request;
  request.set_suite("synthetic");
  for (const auto& [viewer, expected] :
       {std::pair<std::string, std::string>{"alice", "fused"}, {"bob", "bobs"}}) {
    SCOPED_TRACE(viewer);
    const absl::StatusOr<v1::LeaderboardResponse> board = (*store)->Leaderboard(request, viewer);
    ASSERT_TRUE(board.ok()) << board.status();
    ASSERT_EQ(board->entries_size(), 1);
    EXPECT_EQ(board->entries(0).implementation(), expected);
  }
}

}  // namespace
}  // namespace kerneleval::testing

namespace kerneleval::testing {
namespace {

// `implementation` on the small suite "proto_board" with the cache mode `cache`, through the
// server; returns the run id.
std::string BenchOne(const TestServer& t, const std::string& implementation, v1::CacheMode cache) {
  v1::BenchmarkRequest request;
  *request.mutable_custom_suite() = SmallSuite("proto_board");
  request.add_implementations(implementation);
  request.mutable_protocol()->set_warmup(2);
  request.mutable_protocol()->set_repetitions(20);
  request.mutable_protocol()->set_cache(cache);
  std::string run;
  const grpc::Status s = t.client->Benchmark(request, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) run = e.report().run_id();
  });
  EXPECT_TRUE(s.ok()) << s.error_message();
  return run;
}

// The case: cpu_unfused hot (fast, caches warm) and cpu_fused cold. Each is ranked
// on its own protocol's board, the board names its protocol and the other one.
TEST(LeaderboardIdentity, OneProtocolPerBoard) {
  TestServer t = StartServer();
  const std::string hot = BenchOne(t, "cpu_unfused", v1::CACHE_MODE_HOT);
  const std::string cold = BenchOne(t, "cpu_fused", v1::CACHE_MODE_COLD);
  ASSERT_FALSE(hot.empty());
  ASSERT_FALSE(cold.empty());
  ASSERT_EQ(WaitForResults(t.target(), "proto_board", 4), 4u);

  // Default: the newest complete run's protocol (the cold one), and nothing else on it.
  const CliResult newest = Cli(t.target(), {"leaderboard", "--suite", "proto_board", "--json"});
  ASSERT_EQ(newest.rc, 0) << newest.err;
  const nlohmann::json board = nlohmann::json::parse(newest.out);
  EXPECT_EQ(board.value("protocol", ""), "cold_custom") << newest.out;
  ASSERT_EQ(board["entries"].size(), 1u) << newest.out;
  EXPECT_EQ(board["entries"][0]["implementation"], "cpu_fused");
  EXPECT_EQ(board["entries"][0]["run_id"], cold);
  EXPECT_EQ(board["entries"][0]["protocol"], "cold_custom");
  EXPECT_EQ(board["other_protocols"], nlohmann::json::array({"hot_custom"})) << newest.out;

  // The hot board on request, and the table names both.
  const CliResult hot_board =
      Cli(t.target(), {"leaderboard", "--suite", "proto_board", "--protocol", "hot_custom"});
  ASSERT_EQ(hot_board.rc, 0) << hot_board.err;
  EXPECT_THAT(hot_board.out, HasSubstr("protocol hot_custom"));
  EXPECT_THAT(hot_board.out, HasSubstr(hot));
  EXPECT_THAT(hot_board.out, ::testing::Not(HasSubstr(cold)));
  EXPECT_THAT(hot_board.out, ::testing::Not(HasSubstr("cpu_fused")));
  EXPECT_THAT(hot_board.out, HasSubstr("other protocols (a board each, --protocol): cold_custom"));

  // A protocol nobody measured: an empty board that lists what there is.
  const CliResult graph = Cli(
      t.target(), {"leaderboard", "--suite", "proto_board", "--protocol", "hot_graph", "--json"});
  ASSERT_EQ(graph.rc, 0) << graph.err;
  const nlohmann::json empty = nlohmann::json::parse(graph.out);
  EXPECT_FALSE(empty.contains("entries") && !empty["entries"].empty()) << graph.out;
  EXPECT_EQ(empty["other_protocols"], nlohmann::json::array({"cold_custom", "hot_custom"}));

  // Not a label: INVALID_ARGUMENT naming the field, the value bounded.
  v1::LeaderboardRequest bad;
  bad.set_suite("proto_board");
  bad.set_protocol("warm" + std::string(5000, 'x'));
  v1::LeaderboardResponse response;
  grpc::ClientContext context;
  const grpc::Status s =
      v1::Results::NewStub(grpc::CreateChannel(t.target(), grpc::InsecureChannelCredentials()))
          ->Leaderboard(&context, bad, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("protocol:"));
  EXPECT_LT(s.error_message().size(), 600u);
}

}  // namespace
}  // namespace kerneleval::testing
