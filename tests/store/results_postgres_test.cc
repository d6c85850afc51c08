// Two servers on loopback writing one PostgreSQL database: one leaderboard, one history,
// migrations applied once. Run by with_postgres.sh, which starts a throwaway cluster and
// sets KERNELEVAL_TEST_POSTGRES; skipped without it.
#include <cstdlib>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/store/result_store.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

TEST(ResultsPostgres, TwoServersShareOneLeaderboard) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  server::ServerOptions a = LoopbackOptions(), b = LoopbackOptions();
  a.results.results_db = url;
  a.node_name = "server-a";
  b.results.results_db = url;
  b.node_name = "server-b";
  TestServer first = StartServer(a);
  TestServer second = StartServer(b);
  ASSERT_NE(first.server, nullptr);
  ASSERT_NE(second.server, nullptr);
  Bench(first, {"cpu_fused"}, "shared_suite");
  Bench(second, {"cpu_unfused"}, "shared_suite");
  // The writers are asynchronous: wait until both runs are visible.
  nlohmann::json board;
  for (int i = 0; i < 100; ++i) {
    const CliResult r = Cli(first.target(), {"leaderboard", "--suite", "shared_suite", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    board = nlohmann::json::parse(r.out);
    if (board.contains("entries") && board["entries"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(board["entries"].size(), 2u) << board.dump();
  std::set<std::string> servers, impls;
  for (const auto& e : board["entries"]) {
    servers.insert(e["server"].get<std::string>());
    impls.insert(e["implementation"].get<std::string>());
  }
  EXPECT_EQ(servers, (std::set<std::string>{"server-a", "server-b"}));
  EXPECT_EQ(impls, (std::set<std::string>{"cpu_fused", "cpu_unfused"}));
  // The second server answers with the same board.
  const CliResult other =
      Cli(second.target(), {"leaderboard", "--suite", "shared_suite", "--json"});
  ASSERT_EQ(other.rc, 0) << other.err;
  EXPECT_EQ(nlohmann::json::parse(other.out), board);
  const CliResult history = Cli(second.target(), {"history", "--suite", "shared_suite", "--json"});
  EXPECT_EQ(nlohmann::json::parse(history.out)["results"].size(), 4u);
  // Compare across the servers: the two runs have no implementation in common, so each
  // side's rows are missing from the other, and the gate fails on the dropped ones.
  const std::string run_a = board["entries"][0]["run_id"], run_b = board["entries"][1]["run_id"];
  const CliResult cmp = Cli(first.target(), {"compare", run_a, run_a});
  EXPECT_EQ(cmp.rc, 0) << cmp.err;
  EXPECT_NE(cmp.out.find("0 slower"), std::string::npos) << cmp.out;
  const CliResult none = Cli(first.target(), {"compare", run_a, run_b});
  EXPECT_EQ(none.rc, client::cli::kExitRegression) << none.err;
  EXPECT_NE(none.out.find("MISSING from the candidate: "), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("new in the candidate (no baseline): "), std::string::npos) << none.out;
  // The newest complete run before the second server's (cpu_unfused, benched last) of the
  // same suite content and protocol, found in PostgreSQL's runs: the first server's.
  const bool a_is_fused = board["entries"][0]["implementation"] == "cpu_fused";
  const std::string fused_run = a_is_fused ? run_a : run_b;
  const std::string unfused_run = a_is_fused ? run_b : run_a;
  const CliResult previous =
      Cli(first.target(), {"compare", "previous", unfused_run, "--json", "--fail-on", "none"});
  ASSERT_EQ(previous.rc, 0) << previous.err;
  EXPECT_EQ(nlohmann::json::parse(previous.out)["baseline_run"], fused_run) << previous.out;
}

// A third server on the same database finds the schema current and applies nothing.
TEST(ResultsPostgres, MigrationsApplyOnce) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  server::ServerOptions o = LoopbackOptions();
  o.results.results_db = url;
  for (int i = 0; i < 2; ++i) {
    TestServer t = StartServer(o);
    ASSERT_NE(t.server, nullptr);
  }
  auto db = server::store::OpenPostgres(url);
  ASSERT_TRUE(db.ok()) << db.status();
  auto rows = (*db)->Query("SELECT COUNT(*), MAX(version) FROM schema_version");
  ASSERT_TRUE(rows.ok()) << rows.status();
  // Each of server/store/migrations once: 0001_results, 0002_result_owner, 0003_sol_peak,
  // 0004_retention_index, 0005_submissions, 0006_run_order, 0007_jobs, 0008_protocol_label,
  // 0009_job_owners, 0010_job_owner_usage, 0011_owner_device_usage.
  EXPECT_EQ(rows->at(0).at(0), "11");
  EXPECT_EQ(rows->at(0).at(1), "11");
}

// The peak columns of migration 0003 on PostgreSQL: written with each result, filled at start
// for rows without them, and a board of one model across two peaks ranked by time.
TEST(ResultsPostgres, PeaksAreStoredAndABoardAcrossPeaksRanksByTime) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  auto with_peak = [](v1::BenchmarkReport report, const std::string& impl, double peak) {
    report.set_suite("pg_peaks");
    for (v1::WorkloadResult& r : *report.mutable_results()) {
      r.set_implementation(impl);
      r.clear_sol();
      v1::SolFigure* sol = r.add_sol();
      sol->set_source(v1::PEAK_SOURCE_MEASURED_COPY);
      sol->set_peak_bytes_per_second(peak);
      sol->set_sol_ratio(1e5 / peak / r.latency().median_seconds());
    }
    return report;
  };
  {
    server::store::StoreOptions o;
    o.results_db = url;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)
                    ->RecordNow(with_peak(SyntheticReport(1, 10e-6, 0.02), "fused", 9.29e9), 1000)
                    .ok());
    ASSERT_TRUE((*store)
                    ->RecordNow(with_peak(SyntheticReport(2, 9.5e-6, 0.02), "unfused", 12e9), 2000)
                    .ok());
  }
  auto db = server::store::OpenPostgres(url);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)
                  ->Query("UPDATE results SET sol_peak_source = -1, sol_peak_bytes_per_second = "
                          "0 WHERE suite = 'pg_peaks' AND implementation = 'fused'")
                  .ok());
  server::ServerOptions o = LoopbackOptions();
  o.results.results_db = url;
  TestServer t = StartServer(o);
  ASSERT_NE(t.server, nullptr);
  auto rows = (*db)->Query(
      "SELECT DISTINCT implementation, sol_peak_source, sol_peak_bytes_per_second FROM results "
      "WHERE suite = 'pg_peaks' ORDER BY implementation");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ(rows->at(0).at(1), std::to_string(v1::PEAK_SOURCE_MEASURED_COPY));
  EXPECT_DOUBLE_EQ(std::stod(rows->at(0).at(2).value_or("0")), 9.29e9);
  EXPECT_DOUBLE_EQ(std::stod(rows->at(1).at(2).value_or("0")), 12e9);
  const CliResult r = Cli(t.target(), {"leaderboard", "--suite", "pg_peaks", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json board = nlohmann::json::parse(r.out);
  EXPECT_EQ(board["ranked_by_latency"], true) << board.dump();
  ASSERT_EQ(board["entries"].size(), 2u) << board.dump();
  EXPECT_EQ(board["entries"][0]["implementation"], "unfused");
}

}  // namespace
}  // namespace kerneleval::testing
