// A leaderboard means one thing: the results under a suite's name are those of that very
// suite content. A custom suite cannot take a served suite's name with other content, and
// runs stored under an official name with other content (a store shared with a server of
// another suite version, a hand-written report) stay off its leaderboard.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
