// The verdict queue on one real PostgreSQL (run under tests/store/with_postgres.sh): how fast
// claimers drain it as their number grows, and what a claim costs when the jobs table holds a
// million finished jobs and thousands queued. Prints tables for docs/results/; the CTest entry
// runs --quick and checks only that every job was claimed exactly once (timings are for the
// log, never pass / fail).
//
//   queue_bench [--quick]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/store/database.h"
#include "server/store/job_queue.h"
#include "server/store/result_store.h"

namespace kerneleval::server::store {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::int64_t Now() { return absl::ToUnixMicros(absl::Now()); }

bool Check(const absl::Status& s, const char* what) {
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
  return s.ok();
}

// Queues `n` jobs of `owners` owners in one statement.
bool Fill(Database& db, std::int64_t n, int owners, const char* state) {
  return Check(
      db.Query(absl::StrCat(
                   "INSERT INTO jobs (run_id, owner, device_kind, priority, suite, "
                   "request, state, enqueued_at_us, started_at_us, finished_at_us, "
                   "worker, attempts, max_attempts) SELECT md5(random()::text || g), "
                   "'owner' || (g % $1), 'cuda', 0, 'bench', '', '",
                   state, "', CAST($2 AS BIGINT) + g, CASE WHEN '", state,
                   "' = 'done' THEN CAST($2 AS BIGINT) + g ELSE NULL END, CASE WHEN '", state,
                   "' = 'done' THEN CAST($2 AS BIGINT) + g + 1000000 ELSE NULL END, CASE WHEN '",
                   state,
                   "' = 'done' THEN 'old' ELSE NULL END, 0, 3 FROM generate_series(1, "
                   "$3) AS g"),
               {std::int64_t{owners}, Now() - 86400000000, n})
          .status(),
      "fill");
}

struct Drain {
  double seconds = 0, p50_ms = 0, p99_ms = 0;
  std::int64_t claims = 0, duplicates = 0, errors = 0;
};

// `workers` threads claim and finish until the queue is empty.
Drain DrainWith(Database& db, int workers) {
  JobQueue queue(&db);
  std::mutex mu;
  std::vector<double> latencies;
  std::map<std::string, int> seen;
  std::atomic<std::int64_t> errors{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      const std::string name = absl::StrCat("w", w);
      std::vector<double> mine;
      while (true) {
        const auto c0 = Clock::now();
        auto job = queue.Claim(name, {"cuda"}, Now(), 60000000);
        mine.push_back(Ms(Clock::now() - c0));
        if (!job.ok()) {
          ++errors;
          break;
        }
        if (!job->has_value()) break;
        if (!queue.Finish({(*job)->run_id, name, (*job)->attempts}, v1::JOB_STATE_DONE, "", Now())
                 .ok()) {
          ++errors;
        }
        std::lock_guard<std::mutex> lock(mu);
        ++seen[(*job)->run_id];
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : threads) t.join();
  Drain d;
  d.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  d.claims = static_cast<std::int64_t>(seen.size());
  for (const auto& [id, count] : seen) d.duplicates += count - 1;
  d.errors = errors.load();
  d.p50_ms = Percentile(latencies, 0.5);
  d.p99_ms = Percentile(latencies, 0.99);
  return d;
}

// Mean milliseconds and statements of `f` over `n` calls.
template <typename F>
std::pair<double, double> Cost(Database& db, int n, F f) {
  const std::int64_t s0 = db.statements();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f();
  return {Ms(Clock::now() - t0) / n, static_cast<double>(db.statements() - s0) / n};
}

int Main(bool quick) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') {
    std::fprintf(stderr, "queue_bench: KERNELEVAL_TEST_POSTGRES is not set (with_postgres.sh)\n");
    return 2;
  }
  // Claimers share a pool, as a server's threads share --store-connections: a thousand
  // simulated workers do not hold a thousand connections (PostgreSQL allows 100).
  auto db = OpenPostgres(url, 64);
  if (!db.ok() || !Check(Migrate(db->get()), "migrate")) return 1;
  Database& d = **db;
  int failures = 0;

  std::printf("## Draining a queue (jobs claimed and finished, %s)\n\n", "64 connections");
  std::printf(
      "| claimers | jobs | seconds | claims/s | claim p50 ms | claim p99 ms | dup | err |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const std::vector<int> counts =
      quick ? std::vector<int>{1, 16} : std::vector<int>{1, 10, 100, 1000};
  for (int workers : counts) {
    const std::int64_t jobs = quick ? 200 : std::max<std::int64_t>(2000, 4 * workers);
    if (!Check(d.Query("DELETE FROM jobs").status(), "empty") || !Fill(d, jobs, 50, "queued")) {
      return 1;
    }
    const Drain r = DrainWith(d, workers);
    std::printf("| %d | %lld | %.2f | %.0f | %.2f | %.2f | %lld | %lld |\n", workers,
                static_cast<long long>(jobs), r.seconds, static_cast<double>(r.claims) / r.seconds,
                r.p50_ms, r.p99_ms, static_cast<long long>(r.duplicates),
                static_cast<long long>(r.errors));
    if (r.claims != jobs || r.duplicates != 0 || r.errors != 0) ++failures;
  }

  std::printf("\n## One claim beside many finished jobs and a backlog\n\n");
  std::printf(
      "| finished rows | queued | claim ms | stmts/claim | depth ms | order ms | "
      "requeue (none due) ms |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes =
      quick ? std::vector<std::pair<std::int64_t, std::int64_t>>{{10000, 100}}
            : std::vector<std::pair<std::int64_t, std::int64_t>>{
                  {0, 1000}, {1000000, 1000}, {1000000, 10000}};
  for (const auto& [finished, queued] : sizes) {
    if (!Check(d.Query("DELETE FROM jobs").status(), "empty")) return 1;
    if (finished > 0 && !Fill(d, finished, 500, "done")) return 1;
    if (!Fill(d, queued, 50, "queued")) return 1;
    (void)d.Query("ANALYZE jobs");
    JobQueue queue(&d);
    const int n = quick ? 20 : 100;
    int i = 0;
    const auto [claim_ms, claim_statements] =
        Cost(d, n, [&] { (void)queue.Claim(absl::StrCat("c", i++), {"cuda"}, Now(), 60000000); });
    const auto [depth_ms, unused_a] = Cost(d, 20, [&] { (void)queue.QueuedDepth(); });
    const auto [order_ms, unused_b] = Cost(d, 5, [&] { (void)queue.ClaimOrder("cuda"); });
    const auto [requeue_ms, unused_c] = Cost(d, 20, [&] { (void)queue.RequeueExpired(Now()); });
    std::printf("| %lld | %lld | %.2f | %.1f | %.2f | %.2f | %.2f |\n",
                static_cast<long long>(finished), static_cast<long long>(queued), claim_ms,
                claim_statements, depth_ms, order_ms, requeue_ms);
  }
  (void)d.Query("DELETE FROM jobs");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kerneleval::server::store

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return kerneleval::server::store::Main(quick);
}
