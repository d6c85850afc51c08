// The store at fleet size, on a real PostgreSQL (with_postgres.sh; skipped without it): the
// statements one write and one retention pass cost stay the same as the stored runs grow, one
// server at a time applies retention (the advisory lock), the pool bounds the connections a
// server holds, and two servers sharing the database keep its bound between them.
#include <cstdlib>
#include <ctime>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/store/result_store.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

const char* PostgresUrl() {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  return url != nullptr && *url != '\0' ? url : nullptr;
}

// Each test starts from empty tables: retention bounds the whole database.
void EmptyTables(server::store::Database& db) {
  for (const char* table : {"regressions", "results", "runs"}) {
    ASSERT_TRUE(db.Query(std::string("DELETE FROM ") + table).ok());
  }
}

std::int64_t Count(server::store::Database& db, const std::string& sql) {
  auto rows = db.Query(sql);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? std::stoll(rows->at(0).at(0).value_or("-1")) : -1;
}

// `n` runs of two downsampled results each, older than anything the test records: what a
// fleet's months of history look like to retention, inserted by the database in one statement.
void InsertOldRuns(server::store::Database& db, std::int64_t n, std::int64_t before) {
  ASSERT_TRUE(db.Query("INSERT INTO runs (id, created_at, suite, suite_hash, server, "
                       "server_version, git_revision, complete, report_json) SELECT 'old-' || g, "
                       "$1 - g, 'old', '', 'elsewhere', '', '', 1, '{}' FROM "
                       "generate_series(1, $2) AS g",
                       {before, n})
                  .ok());
  ASSERT_TRUE(db.Query("INSERT INTO results (id, run_id, created_at, suite, workload, "
                       "implementation, submission_hash, device, device_model, device_uuid, "
                       "status, median_seconds, sol_ratio, sample_count, seed, result_json, "
                       "samples, quantiles, downsampled, owner, sol_peak_source, "
                       "sol_peak_bytes_per_second) SELECT runs.id || '/' || i, runs.id, "
                       "runs.created_at, 'old', 'w' || i, 'fused', '', 'cuda:0', 'NVIDIA H200', "
                       "'', 1, 1e-5, 0.5, 100, '1', '{}', NULL, '[]', 1, '', 1, 4.8e12 FROM runs, "
                       "generate_series(0, 1) AS i WHERE runs.suite = 'old'")
                  .ok());
}

struct Costs {
  std::int64_t write = 0, retention = 0;
};

// The statements of one RecordNow and of the retention pass after it.
Costs MeasureOneWrite(server::store::ResultStore& store, std::uint64_t seed, std::int64_t now) {
  Costs c;
  std::int64_t before = store.statements();
  EXPECT_TRUE(store.RecordNow(SyntheticReport(seed, 10e-6, 0.02), now).ok());
  c.write = store.statements() - before;
  before = store.statements();
  auto applied = store.ApplyRetention(now);
  EXPECT_TRUE(applied.ok() && *applied) << applied.status();
  c.retention = store.statements() - before;
  return c;
}

TEST(StoreAtFleetSize, StatementsPerWriteStayFlatAsStoredRunsGrow) {
  const char* url = PostgresUrl();
  if (url == nullptr) GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  auto db = server::store::OpenPostgres(url);
  ASSERT_TRUE(db.ok()) << db.status();
  server::store::StoreOptions o;
  o.results_db = url;
  o.max_age_seconds = 365 * 86400;
  o.max_runs = 1000000;
  o.raw_sample_runs = 5;
  o.retention_interval_seconds = 86400;  // passes here are the test's own
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  EmptyTables(**db);
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*store)->RecordNow(SyntheticReport(i, 10e-6, 0.02), now - 100 + i).ok());
  }
  ASSERT_TRUE((*store)->ApplyRetention(now).ok());  // steady state: the backlog downsampled
  const Costs few = MeasureOneWrite(**store, 100, now);
  InsertOldRuns(**db, 30000, now - 1000);
  ASSERT_TRUE((*store)->ApplyRetention(now).ok());
  const Costs many = MeasureOneWrite(**store, 101, now + 1);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM runs"), 30012);
  // The same statements with 12 stored runs and with 30,012 (main issued one more per run
  // beyond --results-raw-sample-runs after every write).
  EXPECT_EQ(many.write, few.write);
  EXPECT_EQ(many.retention, few.retention);
  EXPECT_LE(many.retention, 12);
  // And the pass did its work: exactly the newest 5 runs keep raw samples.
  EXPECT_EQ(Count(**db, "SELECT COUNT(DISTINCT run_id) FROM results WHERE downsampled = 0"), 5);
  // A tighter bound deletes 29,912 runs, their results and regressions in the same few
  // statements.
  (*store).reset();
  o.max_runs = 100;
  store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  // Queued jobs: one that ended before the age bound goes with the runs; one that ended since,
  // and one still queued, stay.
  ASSERT_TRUE((*db)->Query("DELETE FROM jobs").ok());
  ASSERT_TRUE((*db)
                  ->Query("INSERT INTO jobs (run_id, owner, device_kind, priority, suite, request, "
                          "state, enqueued_at_us, finished_at_us, max_attempts) VALUES ('0ld', "
                          "'o', 'cpu', 0, 's', '', 'done', 0, $1, 3), ('0e1', 'o', 'cpu', 0, "
                          "'s', '', 'failed', 0, $2, 3), ('0e2', 'o', 'cpu', 0, 's', '', "
                          "'queued', 0, NULL, 3)",
                          {(now - 400 * 86400) * 1000000, now * 1000000})
                  .ok());
  const std::int64_t before = (*store)->statements();
  auto applied = (*store)->ApplyRetention(now + 2);
  ASSERT_TRUE(applied.ok()) << applied.status();
  // The runs' statements and one for the queued jobs that ended as long ago.
  EXPECT_LE((*store)->statements() - before, 13);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM runs"), 100);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM results WHERE run_id NOT IN (SELECT id FROM runs)"),
            0);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM jobs WHERE run_id IN ('0e1', '0e2')"), 2);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM jobs"), 2);
}

TEST(StoreAtFleetSize, OnlyTheServerHoldingTheRetentionLockAppliesIt) {
  const char* url = PostgresUrl();
  if (url == nullptr) GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  auto db = server::store::OpenPostgres(url);  // one connection: its session lock stays held
  ASSERT_TRUE(db.ok()) << db.status();
  server::store::StoreOptions o;
  o.results_db = url;
  o.max_runs = 2;
  o.retention_interval_seconds = 86400;
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  EmptyTables(**db);
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE((*store)->RecordNow(SyntheticReport(i, 10e-6, 0.02), 1000 * i).ok());
  }
  // Another server is applying retention: this one leaves it alone.
  ASSERT_TRUE((*db)->Query("SELECT pg_advisory_lock($1)", {server::store::kRetentionLockKey}).ok());
  auto skipped = (*store)->ApplyRetention(5000);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_FALSE(*skipped);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM runs"), 4);
  ASSERT_TRUE(
      (*db)->Query("SELECT pg_advisory_unlock($1)", {server::store::kRetentionLockKey}).ok());
  auto applied = (*store)->ApplyRetention(5000);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(*applied);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM runs"), 2);
  EXPECT_EQ(Count(**db, "SELECT MIN(created_at) FROM runs"), 3000);
}

TEST(StoreAtFleetSize, ThePoolBoundsTheConnectionsAServerHolds) {
  const char* url = PostgresUrl();
  if (url == nullptr) GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  auto watcher = server::store::OpenPostgres(url);
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const std::int64_t others =
      Count(**watcher, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()");
  auto pool = server::store::OpenPostgres(url, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  // 16 threads, each holding a connection for 50 ms at a time: more than three would be
  // opened without the bound.
  std::vector<std::thread> threads;
  std::atomic<int> answered{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        if ((*pool)->Query("SELECT pg_sleep(0.05)").ok()) ++answered;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(answered.load(), 64);
  const std::int64_t held = Count(**watcher,
                                  "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = "
                                  "current_database()") -
                            others;
  EXPECT_GE(held, 1);
  EXPECT_LE(held, 3);
}

// Two real servers on loopback share one database and one bound: whichever holds the lock
// applies it on its timer, and both then see only the newest runs.
TEST(StoreAtFleetSize, TwoServersKeepOneBoundOnTheirTimer) {
  const char* url = PostgresUrl();
  if (url == nullptr) GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  auto db = server::store::OpenPostgres(url);
  ASSERT_TRUE(db.ok()) << db.status();
  EmptyTables(**db);
  server::ServerOptions a = LoopbackOptions(), b = LoopbackOptions();
  for (server::ServerOptions* o : {&a, &b}) {
    o->results.results_db = url;
    o->results.max_runs = 2;
    o->results.retention_interval_seconds = 1;
    o->results.connections = 2;
  }
  TestServer first = StartServer(a);
  TestServer second = StartServer(b);
  ASSERT_NE(first.server, nullptr);
  ASSERT_NE(second.server, nullptr);
  for (int i = 0; i < 2; ++i) {
    Bench(first, {"cpu_fused"}, "bounded_suite");
    Bench(second, {"cpu_fused"}, "bounded_suite");
  }
  // Four runs written; within a few timer ticks two are left, seen alike through both.
  std::size_t runs = 0;
  for (int i = 0; i < 300 && runs != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    runs = static_cast<std::size_t>(Count(**db, "SELECT COUNT(*) FROM runs"));
  }
  EXPECT_EQ(runs, 2u);
  for (const TestServer* t : {&first, &second}) {
    const CliResult r =
        Cli(t->target(), {"history", "--runs", "--suite", "bounded_suite", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["runs"].size(), 2u) << r.out;
  }
}

}  // namespace
}  // namespace kerneleval::testing
