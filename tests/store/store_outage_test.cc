// A server and a PostgreSQL that goes away (with_postgres.sh's cluster, stopped and started
// again through KERNELEVAL_TEST_POSTGRES_STOP / _START; skipped without them): the server
// starts while the database is down and serves Run and Benchmark, its Results health naming
// what waits; reports made while the database is away are written once it answers.
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

struct Cluster {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  const char* stop = std::getenv("KERNELEVAL_TEST_POSTGRES_STOP");
  const char* start = std::getenv("KERNELEVAL_TEST_POSTGRES_START");
  bool present() const { return url != nullptr && stop != nullptr && start != nullptr; }
};

bool ResultsServing(const TestServer& t) {
  bool serving = false;
  const grpc::Status s = t.client->HealthCheck("kerneleval.v1.Results", &serving);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return serving;
}

// Polls `history --runs` for the suite until `runs` are listed (60 s at most): the writer and
// the reconnection are asynchronous.
std::size_t WaitForRuns(const TestServer& t, const std::string& suite, std::size_t runs) {
  std::size_t seen = 0;
  for (int i = 0; i < 600 && seen < runs; ++i) {
    const CliResult r = Cli(t.target(), {"history", "--runs", "--suite", suite, "--json"});
    if (r.rc == 0) seen = nlohmann::json::parse(r.out)["runs"].size();
    if (seen < runs) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return seen;
}

void ExpectRunServes(const TestServer& t) {
  v1::RunResponse response;
  const grpc::Status s = t.client->Run(SmallRun(3, 64), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST(StoreOutage, StartsWhileTheDatabaseIsDownAndCatchesUp) {
  const Cluster pg;
  if (!pg.present()) GTEST_SKIP() << "run by with_postgres.sh";
  ASSERT_EQ(std::system(pg.stop), 0);
  server::ServerOptions o = LoopbackOptions();
  o.results.results_db = pg.url;
  TestServer t = StartServer(o);  // ready: readiness is the devices'
  ASSERT_NE(t.server, nullptr);
  bool ready = false;
  ASSERT_TRUE(t.client->HealthCheck("readiness", &ready).ok());
  EXPECT_TRUE(ready);
  EXPECT_FALSE(ResultsServing(t));
  ExpectRunServes(t);
  const v1::BenchmarkReport during = Bench(t, {"cpu_fused"}, "outage_suite");
  EXPECT_FALSE(during.run_id().empty());
  const CliResult waiting = Cli(t.target(), {"history", "--suite", "outage_suite"});
  EXPECT_NE(waiting.rc, 0);
  EXPECT_NE(waiting.err.find("UNAVAILABLE"), std::string::npos) << waiting.err;
  EXPECT_NE(waiting.err.find("results database is not reachable yet"), std::string::npos)
      << waiting.err;

  ASSERT_EQ(std::system(pg.start), 0);
  bool serving = false;
  for (int i = 0; i < 600 && !serving; ++i) {
    serving = ResultsServing(t);
    if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(serving);
  EXPECT_EQ(WaitForRuns(t, "outage_suite", 1), 1u);
}

TEST(StoreOutage, ARestartMidFlightLosesNoReport) {
  const Cluster pg;
  if (!pg.present()) GTEST_SKIP() << "run by with_postgres.sh";
  server::ServerOptions o = LoopbackOptions();
  o.results.results_db = pg.url;
  o.results.connections = 2;
  TestServer t = StartServer(o);
  ASSERT_NE(t.server, nullptr);
  Bench(t, {"cpu_fused"}, "restart_suite");
  ASSERT_EQ(WaitForRuns(t, "restart_suite", 1), 1u);

  ASSERT_EQ(std::system(pg.stop), 0);
  ExpectRunServes(t);
  Bench(t, {"cpu_fused"}, "restart_suite");  // written once the database answers again
  ExpectRunServes(t);
  ASSERT_EQ(std::system(pg.start), 0);
  EXPECT_EQ(WaitForRuns(t, "restart_suite", 2), 2u);
  // The pooled connections the restart broke were replaced: a third report goes straight in.
  Bench(t, {"cpu_fused"}, "restart_suite");
  EXPECT_EQ(WaitForRuns(t, "restart_suite", 3), 3u);
  EXPECT_TRUE(ResultsServing(t));
}

}  // namespace
}  // namespace kerneleval::testing
