// Every finished Benchmark report, kept with its raw samples in SQLite (--data-dir) or
// PostgreSQL (--results-db), and the queries the Results service answers: history, the
// leaderboard, comparisons. Each new result is compared on arrival against the baseline of
// its series (suite, workload, implementation, GPU model); the verdict is stored and set on
// Prometheus gauges (regression_metrics.h).
//
// Thread-safety: every method may be called from any thread. Record() only queues: one
// writer thread owns the inserts, so a device worker never waits for the disk.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "kerneleval/v1/results.pb.h"
#include "prometheus/registry.h"
#include "server/store/database.h"
#include "server/store/regression_metrics.h"
#include "server/store/viewer.h"

namespace kerneleval::server::store {

struct StoreOptions {
  std::string data_dir;     // SQLite file results.sqlite3 here when results_db is empty
  std::string results_db;   // postgresql://... : a database several servers share
  std::string server_name;  // stored with each run (default: the hostname)
  std::string server_version, git_revision;
  // PostgreSQL connections this server may hold at once (--store-connections): the writer,
  // retention and the Results queries share them.
  int connections = 4;
  // Retention (0 = unbounded): runs older than max_age_seconds and runs beyond the newest
  // max_runs are deleted; runs beyond the newest raw_sample_runs keep 21 quantiles instead
  // of their raw samples. Applied every retention_interval_seconds by one server of those
  // sharing the database (ApplyRetention), not after each write.
  std::int64_t max_age_seconds = 0;
  std::int64_t max_runs = 0;
  std::int64_t raw_sample_runs = 0;
  std::int64_t retention_interval_seconds = 60;
  // Regression detection: a new result against the pooled samples of the previous
  // `baseline_results` passing results of its series.
  int baseline_results = 5;
  double alpha = 0.05;
  double min_relative_difference = 0.01;
  // The suites this server serves, by name: SuiteHash of each. A leaderboard under one of
  // these names ranks only runs of that very content; under any other name, only runs of
  // the content its newest run had.
  std::map<std::string, std::string> official_suite_hashes;
  // Told when the database becomes reachable (true) or is waited for (false, with why),
  // from the store's own thread. PostgreSQL only: SQLite is a file, open or failed at start.
  std::function<void(bool connected, const std::string& waiting_for)> on_connection;
};

class ResultStore {
 public:
  // Opens the database, applies missing migrations, starts the writer. `registry` (may be
  // null) receives the regression gauges. A PostgreSQL that cannot be reached is not an
  // error: the store opens waiting for it, retrying with backoff (0.5 s doubling to 30 s);
  // until it answers, reports queue in memory and queries are UNAVAILABLE saying so.
  static absl::StatusOr<std::unique_ptr<ResultStore>> Open(
      const StoreOptions& options, std::shared_ptr<prometheus::Registry> registry);
  ~ResultStore();  // writes what is queued, then stops the writer

  // A fresh run id: 128 random bits in hex, so servers sharing a database never clash.
  static std::string NewRunId();

  // Queues a finished report for the writer thread and returns, at once, the id it will be
  // stored under: report.run_id() when set (reserved with NewRunId() when the call began),
  // else a new one. `owner`: the caller whose Benchmark it was, who alone sees its
  // submissions' results.
  std::string Record(const v1::BenchmarkReport& report, const std::string& owner);
  // Writes now on the calling thread; returns the run id (report.run_id() when set).
  // `now_unix_seconds` 0 = the clock.
  absl::StatusOr<std::string> RecordNow(const v1::BenchmarkReport& report,
                                        std::int64_t now_unix_seconds = 0,
                                        const std::string& owner = "");
  // Writes now on the calling thread, in one transaction with `fence` (run first on it): when
  // the fence fails (a queued job whose lease ran out, job_queue.h), nothing is stored and its
  // status is returned. Returns the run id.
  absl::StatusOr<std::string> RecordFenced(const v1::BenchmarkReport& report,
                                           const std::string& owner,
                                           const std::function<absl::Status(Database& tx)>& fence);
  // Waits until every queued report is written (at once while the database is waited for).
  void Flush();
  // Whether the database answers and is migrated; else what the store waits for.
  bool connected() const { return connected_.load(); }
  std::string WaitingFor() const;

  // Queries, as `viewer` sees the store (Viewer above; the Results service always names one).
  absl::StatusOr<v1::HistoryResponse> History(const v1::HistoryRequest& request,
                                              const Viewer& viewer = std::nullopt);
  absl::StatusOr<v1::LeaderboardResponse> Leaderboard(const v1::LeaderboardRequest& request,
                                                      const Viewer& viewer = std::nullopt);
  absl::StatusOr<v1::CompareResponse> Compare(const v1::CompareRequest& request,
                                              const Viewer& viewer = std::nullopt);
  // The run as its Benchmark reported it (the stored report with its results in their order,
  // samples included), as `viewer` sees it: what a client following a queued job gets once
  // another server has run it. NOT_FOUND when no such run is stored.
  absl::StatusOr<v1::BenchmarkReport> RunReport(const std::string& run_id,
                                                const Viewer& viewer = std::nullopt);
  absl::StatusOr<v1::StoredResult> Get(const std::string& result_id,
                                       const Viewer& viewer = std::nullopt);
  absl::StatusOr<v1::ExportResponse> Export(const v1::ExportRequest& request,
                                            const Viewer& viewer = std::nullopt);
  // One pass of retention, a fixed number of set-based statements whatever the number of
  // stored runs (plus one UPDATE per 200 results that just crossed raw_sample_runs). On
  // PostgreSQL only the server holding the retention advisory lock applies it: false when
  // another server was applying it, and this one did nothing.
  absl::StatusOr<bool> ApplyRetention(std::int64_t now_unix_seconds);
  // The database, for the other tables it holds (submission_table.h); and whether they may
  // be used: OK once connected and migrated, else UNAVAILABLE saying what the store waits for.
  Database* database() const { return db_.get(); }
  absl::Status Usable() const { return CheckConnected(); }
  // Statements sent to the database so far (Database::statements).
  std::int64_t statements() const { return db_->statements(); }

  const char* engine() const { return db_->engine(); }

 private:
  ResultStore(StoreOptions options, std::unique_ptr<Database> db);
  void WriterLoop();
  void RetentionLoop();
  // Migrations and the peak fill: what a database needs before the store uses it.
  absl::Status Prepare();
  void ConnectLoop();
  // OK once connected(); else UNAVAILABLE naming what the store waits for.
  absl::Status CheckConnected() const;
  // Writes a report's run and results in one transaction; a database that cannot be reached
  // is retried with backoff until it answers or the store closes.
  absl::StatusOr<std::string> InsertRun(
      const v1::BenchmarkReport& report, std::int64_t now, const std::string& owner,
      const std::function<absl::Status(Database& tx)>& fence = nullptr);
  absl::StatusOr<std::string> InsertRunRetrying(const v1::BenchmarkReport& report,
                                                const std::string& owner);
  absl::Status DetectRegressions(const std::string& run_id, std::int64_t now);
  // A run id, or a unique prefix of one (8 characters at least; shorter text is taken as
  // it is): the full id. An ambiguous prefix is INVALID_ARGUMENT naming `field` and listing
  // the candidates; a prefix of no run comes back unchanged (queries then find nothing).
  absl::StatusOr<std::string> ResolveRunId(const std::string& text, const std::string& field);
  // The newest complete run before `candidate` (a full id) of the same suite content and
  // protocol (comparability.h ProtocolIdentity); NOT_FOUND when there is none.
  absl::StatusOr<std::string> PreviousRun(const std::string& candidate);
  // OK for "", a served suite, or a name of a result `viewer` sees; else NOT_FOUND naming
  // `field`, with the nearest name when it looks like a typo (an empty table would hide it),
  // chosen among the served suites and the viewer's own (never another owner's custom suite).
  absl::Status CheckSuiteKnown(const std::string& suite, const std::string& field,
                               const Viewer& viewer);
  // Whether a result stored for `owner` in `suite` (content `suite_hash`) may show its suite's
  // description to `viewer`: a served suite's, or the viewer's own custom suite's. Another
  // owner's custom suite is free text of theirs that the built-ins' results would carry.
  bool OwnSuiteOf(const std::string& owner, const std::string& suite, const std::string& suite_hash,
                  const Viewer& viewer) const;
  absl::StatusOr<v1::HistoryResponse> RunHistory(const v1::HistoryRequest& request,
                                                 std::int64_t page, std::int64_t offset,
                                                 const Viewer& viewer);
  absl::StatusOr<std::vector<v1::StoredResult>> Select(const v1::ResultFilter& filter,
                                                       std::int64_t limit, std::int64_t offset,
                                                       bool include_samples, const Viewer& viewer);

  StoreOptions options_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<RegressionGauges> gauges_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<v1::BenchmarkReport, std::string>> queue_;  // with the owner
  bool writing_ = false;
  bool stop_ = false;
  std::atomic<bool> connected_{false};
  std::string waiting_for_;  // guarded by mu_
  std::thread writer_;
  std::thread retention_;
  std::thread connector_;
};

// SHA-256 (hex) of a suite definition's deterministic serialization.
std::string SuiteHash(const v1::SuiteDefinition& definition);

// Applies the compiled-in migrations the database lacks (schema_version records them).
absl::Status Migrate(Database* db);

}  // namespace kerneleval::server::store
