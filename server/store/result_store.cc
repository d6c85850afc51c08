// ResultStore's writing side: opening the database, the writer thread that records runs and
// regression detection. Retention: result_store_retention.cc. Queries: result_store_history.cc
// (results, runs) and result_store_ranking.cc (leaderboard, compare, export).
#include "server/store/result_store.h"

#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <random>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/bounded_text.h"
#include "common/host_name.h"
#include "common/private_files.h"
#include "common/protocol.h"
#include "common/status_macros.h"
#include "common/submission_id.h"
#include "server/store/comparability.h"
#include "server/store/compare_results.h"
#include "server/store/result_rows.h"
#include "server/store/result_store_sql.h"
#include "server/store/sample_statistics.h"
#include "server/store/sol_peaks.h"

namespace kerneleval::server::store {
namespace {

std::string Hex(const unsigned char* bytes, std::size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string SuiteHash(const v1::SuiteDefinition& definition) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    definition.SerializeToCodedStream(&coded);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return Hex(digest, sizeof(digest));
}

ResultStore::ResultStore(StoreOptions options, std::unique_ptr<Database> db)
    : options_(std::move(options)), db_(std::move(db)) {}

absl::StatusOr<std::unique_ptr<ResultStore>> ResultStore::Open(
    const StoreOptions& options, std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<Database> db;
  if (!options.results_db.empty()) {
    auto opened = OpenPostgres(options.results_db, options.connections, /*connect_now=*/false);
    if (!opened.ok()) return opened.status();
    db = std::move(*opened);
  } else {
    if (options.data_dir.empty()) {
      // No directory: history for the life of the process only.
      auto opened = OpenSqlite(":memory:");
      if (!opened.ok()) return opened.status();
      db = std::move(*opened);
    }
  }
  if (db == nullptr) {
    if (absl::Status made = CreatePrivateDirectories(options.data_dir); !made.ok()) {
      return absl::UnavailableError(absl::StrCat("--data-dir: ", made.message()));
    }
    // Made 0600 before SQLite opens it: its -wal, -shm and -journal files take its mode.
    const std::string path = (std::filesystem::path(options.data_dir) / "results.sqlite3").string();
    if (absl::Status made = PreparePrivateFile(path); !made.ok()) {
      return absl::UnavailableError(absl::StrCat("--data-dir: ", made.message()));
    }
    auto opened = OpenSqlite(path);
    if (!opened.ok()) return opened.status();
    db = std::move(*opened);
  }
  const bool postgres = !options.results_db.empty();
  StoreOptions resolved = options;
  if (resolved.server_name.empty()) resolved.server_name = HostName();
  if (resolved.server_name.empty()) resolved.server_name = "unknown";
  std::unique_ptr<ResultStore> store(new ResultStore(std::move(resolved), std::move(db)));
  if (registry != nullptr) store->gauges_ = std::make_unique<RegressionGauges>(registry);
  if (absl::Status prepared = store->Prepare(); prepared.ok()) {
    store->connected_ = true;
  } else if (postgres && absl::IsUnavailable(prepared)) {
    // A fleet's database may be down while its servers start: they serve Run meanwhile.
    store->waiting_for_ = std::string(prepared.message());
    if (store->options_.on_connection) {
      store->options_.on_connection(false, store->waiting_for_);
    } else {
      fprintf(stderr, "results store: waiting for the database: %s\n", store->waiting_for_.c_str());
    }
    store->connector_ = std::thread([s = store.get()] { s->ConnectLoop(); });
  } else {
    return prepared;
  }
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  const StoreOptions& o = store->options_;
  if (o.retention_interval_seconds > 0 &&
      (o.max_age_seconds > 0 || o.max_runs > 0 || o.raw_sample_runs > 0)) {
    store->retention_ = std::thread([s = store.get()] { s->RetentionLoop(); });
  }
  return store;
}

ResultStore::~ResultStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (retention_.joinable()) retention_.join();
  if (connector_.joinable()) connector_.join();
}

// 128 random bits: ids made by servers that share one database never collide.
std::string ResultStore::NewRunId() {
  std::random_device rd;
  unsigned char bytes[16];
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rd());
  return Hex(bytes, sizeof(bytes));
}

std::string ResultStore::Record(const v1::BenchmarkReport& report, const std::string& owner) {
  // The id is fixed here, before the write: the caller's report can name it at once.
  std::string run_id = report.run_id().empty() ? NewRunId() : report.run_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(report, owner);
    queue_.back().first.set_run_id(run_id);
  }
  cv_.notify_all();
  return run_id;
}

void ResultStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return (queue_.empty() && !writing_) || !connected_; });
}

void ResultStore::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || (connected_ && !queue_.empty()); });
    if (queue_.empty() || !connected_) {  // stopping
      if (!queue_.empty()) {
        fprintf(stderr, "results store: %zu benchmark reports not stored: %s\n", queue_.size(),
                waiting_for_.c_str());
      }
      return;
    }
    auto [report, owner] = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    auto written = InsertRunRetrying(report, owner);
    absl::Status s = written.status();
    if (s.ok()) s = DetectRegressions(*written, static_cast<std::int64_t>(std::time(nullptr)));
    if (!s.ok()) {
      fprintf(stderr, "results store: a benchmark report was not %s: %s\n",
              written.ok() ? "checked for regressions" : "stored",
              std::string(s.message()).c_str());
    }
    lock.lock();
    writing_ = false;
    cv_.notify_all();
  }
}

absl::StatusOr<std::string> ResultStore::RecordNow(const v1::BenchmarkReport& report,
                                                   std::int64_t now, const std::string& owner) {
  const std::int64_t asked = now;
  if (now == 0) now = static_cast<std::int64_t>(std::time(nullptr));
  RETURN_IF_ERROR(CheckConnected());
  auto run_id = InsertRun(report, asked, owner);
  if (!run_id.ok()) return run_id.status();
  RETURN_IF_ERROR(DetectRegressions(*run_id, now));
  return run_id;
}

absl::StatusOr<std::string> ResultStore::RecordFenced(
    const v1::BenchmarkReport& report, const std::string& owner,
    const std::function<absl::Status(Database& tx)>& fence) {
  RETURN_IF_ERROR(CheckConnected());
  auto run_id = InsertRun(report, 0, owner, fence);
  if (!run_id.ok()) return run_id.status();
  RETURN_IF_ERROR(DetectRegressions(*run_id, static_cast<std::int64_t>(std::time(nullptr))));
  return run_id;
}

absl::StatusOr<std::string> ResultStore::InsertRun(
    const v1::BenchmarkReport& report, std::int64_t now, const std::string& owner,
    const std::function<absl::Status(Database& tx)>& fence) {
  // One clock read for both columns: time() is the coarse clock, up to a tick behind, and
  // read apart from the micros it could put a run before the one stored just earlier.
  const absl::Time wall = absl::Now();
  if (now == 0) now = absl::ToUnixSeconds(wall);
  const std::string run_id = report.run_id().empty() ? NewRunId() : report.run_id();
  const std::string suite_hash = SuiteHash(report.definition());
  const std::string protocol = ProtocolLabel(report.protocol());
  v1::BenchmarkReport header = report;
  header.clear_results();
  std::map<std::string, v1::Environment> environments;
  for (const auto& e : report.environments()) environments[e.device().name()] = e;

  // Microseconds within `now`'s second from the real clock: runs of one second keep the
  // order they were stored in (created_at_us, migration 0006).
  const std::int64_t created_at_us = now * 1000000 + absl::ToUnixMicros(wall) % 1000000;
  absl::Status inserted = db_->Transaction([&](Database& tx) -> absl::Status {
    if (fence) RETURN_IF_ERROR(fence(tx));
    auto run = tx.Query(
        "INSERT INTO runs (id, created_at, suite, suite_hash, server, server_version, "
        "git_revision, complete, report_json, created_at_us, protocol) VALUES ($1, $2, $3, $4, "
        "$5, $6, $7, $8, $9, $10, $11)",
        {run_id, now, report.suite(), suite_hash, options_.server_name, options_.server_version,
         options_.git_revision, std::int64_t{report.complete() ? 1 : 0}, ToJson(header),
         created_at_us, protocol});
    if (!run.ok()) return run.status();
    for (int i = 0; i < report.results_size(); ++i) {
      v1::WorkloadResult r = report.results(i);
      const std::vector<double> samples(r.samples_seconds().begin(), r.samples_seconds().end());
      r.clear_samples_seconds();
      const v1::Environment& env = environments[r.device()];
      // Submitted kernels take their content-hash id as the implementation name.
      const std::string submission_hash =
          IsSubmissionId(r.implementation()) ? r.implementation() : "";
      auto row = tx.Query(
          "INSERT INTO results (id, run_id, created_at, suite, workload, implementation, "
          "submission_hash, device, device_model, device_uuid, status, median_seconds, sol_ratio, "
          "sample_count, seed, result_json, samples, downsampled, owner, sol_peak_source, "
          "sol_peak_bytes_per_second, protocol) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
          "$11, $12, $13, $14, $15, $16, $17, 0, $18, $19, $20, $21)",
          {absl::StrCat(run_id, "/", i),
           run_id,
           now,
           report.suite(),
           r.workload(),
           r.implementation(),
           submission_hash,
           r.device(),
           env.device().model(),
           env.device().uuid(),
           std::int64_t{r.status()},
           r.latency().median_seconds(),
           PrimarySolRatio(r),
           static_cast<std::int64_t>(samples.size()),
           std::to_string(report.protocol().seed()),
           ToJson(r),
           SamplesToJson(samples),
           owner,
           std::int64_t{PeakOf(r).source},
           PeakOf(r).bytes_per_second,
           protocol});
      if (!row.ok()) return row.status();
    }
    return absl::OkStatus();
  });
  if (!inserted.ok()) return inserted;
  return run_id;
}

absl::Status ResultStore::DetectRegressions(const std::string& run_id, std::int64_t now) {
  v1::ResultFilter filter;
  filter.set_run_id(run_id);
  auto fresh = Select(filter, 100000, 0, true, std::nullopt);
  if (!fresh.ok()) return fresh.status();
  for (const v1::StoredResult& s : *fresh) {
    const v1::WorkloadResult& r = s.result();
    const std::string model = s.environment().device().model();
    // The series' previous results, newest first; passing ones form the baseline.
    std::vector<SqlValue> params = {s.suite(), r.workload(), r.implementation(), model, run_id};
    auto previous = db_->Query(
        absl::StrCat("SELECT id, status FROM results WHERE suite = $1 AND workload = $2 AND "
                     "implementation = $3 AND device_model = $4 AND run_id <> $5 ORDER BY "
                     "created_at DESC, id DESC LIMIT ",
                     std::max(1, options_.baseline_results) * 4),
        params);
    if (!previous.ok()) return previous.status();
    if (previous->empty()) continue;
    std::vector<v1::StoredResult> baseline;
    for (const SqlRow& row : *previous) {
      if (Int(row[1]) != v1::RESULT_STATUS_PASSED) continue;
      if (static_cast<int>(baseline.size()) >= options_.baseline_results) break;
      auto got = Get(row[0].value_or(""));
      // Only results of the same problem, protocol and device model are a baseline.
      if (got.ok() && SetupDifferences(SetupOf(*got), SetupOf(s)).empty()) {
        baseline.insert(baseline.begin(), *got);
      }
    }
    v1::SampleComparison c =
        CompareStored(baseline, {s}, options_.alpha, options_.min_relative_difference);
    // A change of correctness is against the series' latest result, passing or not.
    const std::int64_t last_status = Int(previous->front()[1]);
    const bool correctness_changed =
        last_status != r.status() &&
        (last_status == v1::RESULT_STATUS_PASSED || r.status() == v1::RESULT_STATUS_PASSED);
    c.set_correctness_changed(correctness_changed);
    const Change change = ChangeOf(c.verdict());
    auto stored = db_->Query(
        "INSERT INTO regressions (result_id, created_at, suite, workload, implementation, "
        "device_model, verdict, correctness_changed, ratio, ci_low, ci_high, p_value, "
        "baseline_results) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        {s.id(), now, s.suite(), r.workload(), r.implementation(), model,
         std::string(ChangeName(change)), std::int64_t{correctness_changed ? 1 : 0}, c.ratio(),
         c.ratio_ci_low(), c.ratio_ci_high(), c.p_value(),
         static_cast<std::int64_t>(baseline.size())});
    if (!stored.ok()) return stored.status();
    if (gauges_ != nullptr) {
      gauges_->Set({s.suite(), r.workload(), r.implementation(), model, r.device(),
                    ProtocolLabel(s.receipt().protocol())},
                   c.ratio(), baseline.empty() ? 0 : 1 - c.p_value(),
                   change == Change::kSlower || correctness_changed);
    }
  }
  return absl::OkStatus();
}

}  // namespace kerneleval::server::store
