#include "server/store/result_store.h"

#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bounded_text.h"
#include "common/did_you_mean.h"
#include "common/host_name.h"
#include "common/status_macros.h"
#include "metrics/report_metrics.h"
#include "server/store/comparability.h"
#include "server/store/compare_results.h"
#include "server/store/result_rows.h"
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

std::int64_t Int(const std::optional<std::string>& v) {
  std::int64_t n = 0;
  if (v.has_value()) (void)absl::SimpleAtoi(*v, &n);
  return n;
}

// The columns Select reads, in order (results joined with their run).
constexpr char kSelectColumns[] =
    "SELECT r.id, r.run_id, r.created_at, r.suite, runs.suite_hash, runs.server, r.result_json, "
    "r.samples, r.quantiles, r.downsampled, runs.report_json FROM results r JOIN runs ON "
    "runs.id = r.run_id";

// A LIKE pattern matching `text` literally anywhere: "H200" finds "NVIDIA H200", and the
// `%` or `_` of a model name match themselves only (both engines honour ESCAPE).
constexpr char kLikeEscape[] = " ESCAPE '\\'";
std::string Contains(const std::string& text) {
  std::string pattern = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') pattern += '\\';
    pattern += c;
  }
  return pattern + "%";
}

// The term that keeps other owners' submissions out ("" for every result); `params` gets
// the owner. Built-ins are the rows without a submission hash.
std::string VisibleTo(const Viewer& viewer, std::vector<SqlValue>* params) {
  if (!viewer.has_value()) return "";
  params->push_back(*viewer);
  return absl::StrCat("(r.submission_hash = '' OR r.owner = $", params->size(), ")");
}

// WHERE clause and parameters of a filter (the parameters numbered from $1).
std::string Where(const v1::ResultFilter& f, const Viewer& viewer, std::vector<SqlValue>* params) {
  std::vector<std::string> terms;
  auto add = [&](const std::string& column_op, SqlValue v) {
    params->push_back(std::move(v));
    terms.push_back(absl::StrCat(column_op, " $", params->size()));
  };
  if (std::string visible = VisibleTo(viewer, params); !visible.empty()) {
    terms.push_back(std::move(visible));
  }
  if (!f.suite().empty()) add("r.suite =", f.suite());
  if (!f.workload().empty()) add("r.workload =", f.workload());
  if (!f.implementation().empty()) add("r.implementation =", f.implementation());
  if (!f.device_model().empty()) {
    params->push_back(Contains(f.device_model()));
    terms.push_back(absl::StrCat("r.device_model LIKE $", params->size(), kLikeEscape));
  }
  if (!f.run_id().empty()) add("r.run_id =", f.run_id());
  if (f.since_unix_seconds() != 0) add("r.created_at >=", f.since_unix_seconds());
  if (f.until_unix_seconds() != 0) add("r.created_at <", f.until_unix_seconds());
  if (terms.empty()) return "";
  std::string where = " WHERE ";
  for (std::size_t i = 0; i < terms.size(); ++i) {
    absl::StrAppend(&where, i == 0 ? "" : " AND ", terms[i]);
  }
  return where;
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
    auto opened = OpenPostgres(options.results_db);
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
    std::error_code ec;
    std::filesystem::create_directories(options.data_dir, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("--data-dir: cannot create ", options.data_dir, ": ", ec.message()));
    }
    auto opened =
        OpenSqlite((std::filesystem::path(options.data_dir) / "results.sqlite3").string());
    if (!opened.ok()) return opened.status();
    db = std::move(*opened);
  }
  if (absl::Status s = Migrate(db.get()); !s.ok()) return s;
  if (absl::Status s = FillStoredPeaks(db.get()); !s.ok()) return s;
  StoreOptions resolved = options;
  if (resolved.server_name.empty()) resolved.server_name = HostName();
  if (resolved.server_name.empty()) resolved.server_name = "unknown";
  std::unique_ptr<ResultStore> store(new ResultStore(std::move(resolved), std::move(db)));
  if (registry != nullptr) store->gauges_ = std::make_unique<RegressionGauges>(registry);
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

ResultStore::~ResultStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
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
  cv_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void ResultStore::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    auto [report, owner] = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    auto written = RecordNow(report, 0, owner);
    if (!written.ok()) {
      fprintf(stderr, "results store: a benchmark report was not stored: %s\n",
              std::string(written.status().message()).c_str());
    }
    lock.lock();
    writing_ = false;
    cv_.notify_all();
  }
}

absl::StatusOr<std::string> ResultStore::RecordNow(const v1::BenchmarkReport& report,
                                                   std::int64_t now, const std::string& owner) {
  if (now == 0) now = static_cast<std::int64_t>(std::time(nullptr));
  const std::string run_id = report.run_id().empty() ? NewRunId() : report.run_id();
  const std::string suite_hash = SuiteHash(report.definition());
  v1::BenchmarkReport header = report;
  header.clear_results();
  std::map<std::string, v1::Environment> environments;
  for (const auto& e : report.environments()) environments[e.device().name()] = e;

  if (auto s = db_->Query("BEGIN"); !s.ok()) return s.status();
  auto rollback = [this](absl::Status s) {
    (void)db_->Query("ROLLBACK");
    return s;
  };
  auto run = db_->Query(
      "INSERT INTO runs (id, created_at, suite, suite_hash, server, server_version, "
      "git_revision, complete, report_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
      {run_id, now, report.suite(), suite_hash, options_.server_name, options_.server_version,
       options_.git_revision, std::int64_t{report.complete() ? 1 : 0}, ToJson(header)});
  if (!run.ok()) return rollback(run.status());
  for (int i = 0; i < report.results_size(); ++i) {
    v1::WorkloadResult r = report.results(i);
    const std::vector<double> samples(r.samples_seconds().begin(), r.samples_seconds().end());
    r.clear_samples_seconds();
    const v1::Environment& env = environments[r.device()];
    // Submitted kernels take their content-hash id as the implementation name.
    const std::string submission_hash =
        r.implementation().rfind("sub-", 0) == 0 ? r.implementation() : "";
    auto row = db_->Query(
        "INSERT INTO results (id, run_id, created_at, suite, workload, implementation, "
        "submission_hash, device, device_model, device_uuid, status, median_seconds, sol_ratio, "
        "sample_count, seed, result_json, samples, downsampled, owner, sol_peak_source, "
        "sol_peak_bytes_per_second) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
        "$13, $14, $15, $16, $17, 0, $18, $19, $20)",
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
         PeakOf(r).bytes_per_second});
    if (!row.ok()) return rollback(row.status());
  }
  if (auto s = db_->Query("COMMIT"); !s.ok()) return rollback(s.status());
  if (absl::Status s = DetectRegressions(run_id, now); !s.ok()) return s;
  if (absl::Status s = ApplyRetention(now); !s.ok()) return s;
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
                    metrics::ProtocolLabel(s.receipt().protocol())},
                   c.ratio(), baseline.empty() ? 0 : 1 - c.p_value(),
                   change == Change::kSlower || correctness_changed);
    }
  }
  return absl::OkStatus();
}

absl::Status ResultStore::ApplyRetention(std::int64_t now) {
  std::vector<std::string> doomed;
  if (options_.max_age_seconds > 0) {
    auto old =
        db_->Query("SELECT id FROM runs WHERE created_at < $1", {now - options_.max_age_seconds});
    if (!old.ok()) return old.status();
    for (const SqlRow& row : *old) doomed.push_back(row[0].value_or(""));
  }
  const bool count_bound = options_.max_runs > 0 || options_.raw_sample_runs > 0;
  std::vector<std::string> newest_first;
  if (count_bound) {
    auto all = db_->Query("SELECT id FROM runs ORDER BY created_at DESC, id DESC");
    if (!all.ok()) return all.status();
    for (const SqlRow& row : *all) newest_first.push_back(row[0].value_or(""));
  }
  if (options_.max_runs > 0) {
    for (std::size_t i = static_cast<std::size_t>(options_.max_runs); i < newest_first.size();
         ++i) {
      doomed.push_back(newest_first[i]);
    }
  }
  for (const std::string& id : doomed) {
    for (const char* sql :
         {"DELETE FROM regressions WHERE result_id IN (SELECT id FROM results WHERE run_id = $1)",
          "DELETE FROM results WHERE run_id = $1", "DELETE FROM runs WHERE id = $1"}) {
      if (auto s = db_->Query(sql, {id}); !s.ok()) return s.status();
    }
  }
  if (options_.raw_sample_runs <= 0) return absl::OkStatus();
  for (std::size_t i = static_cast<std::size_t>(options_.raw_sample_runs); i < newest_first.size();
       ++i) {
    auto rows = db_->Query("SELECT id, samples FROM results WHERE run_id = $1 AND downsampled = 0",
                           {newest_first[i]});
    if (!rows.ok()) return rows.status();
    for (const SqlRow& row : *rows) {
      // 21 quantiles keep the shape a later comparison needs at a fixed size.
      const std::vector<double> q = Quantiles(SamplesFromJson(row[1].value_or("[]")), 21);
      auto s = db_->Query(
          "UPDATE results SET samples = NULL, quantiles = $1, downsampled = 1 WHERE id = $2",
          {SamplesToJson(q), row[0].value_or("")});
      if (!s.ok()) return s.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResultStore::ResolveRunId(const std::string& text,
                                                      const std::string& field) {
  constexpr std::size_t kMinPrefix = 8, kIdLength = 32;
  if (text.size() < kMinPrefix || text.size() >= kIdLength) return text;
  // SUBSTR, not LIKE: the prefix is matched literally on SQLite and PostgreSQL alike.
  auto rows = db_->Query(absl::StrCat("SELECT id FROM runs WHERE SUBSTR(id, 1, ", text.size(),
                                      ") = $1 ORDER BY id "
                                      "LIMIT 6"),
                         {text});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return text;
  if (rows->size() == 1) return rows->front()[0].value_or(text);
  std::string candidates;
  for (std::size_t i = 0; i < rows->size() && i < 5; ++i) {
    absl::StrAppend(&candidates, i == 0 ? "" : ", ", (*rows)[i][0].value_or(""));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", Quote(text), " is the prefix of more than one run (", candidates,
                   rows->size() > 5 ? ", ..." : "", "); give more characters"));
}

absl::Status ResultStore::CheckSuiteKnown(const std::string& suite, const std::string& field) {
  if (suite.empty() || options_.official_suite_hashes.count(suite) > 0) return absl::OkStatus();
  auto found = db_->Query("SELECT 1 FROM runs WHERE suite = $1 LIMIT 1", {suite});
  if (!found.ok()) return found.status();
  if (!found->empty()) return absl::OkStatus();
  auto rows = db_->Query("SELECT DISTINCT suite FROM runs ORDER BY suite LIMIT 1000");
  if (!rows.ok()) return rows.status();
  std::vector<std::string> names;
  for (const auto& [name, hash] : options_.official_suite_hashes) names.push_back(name);
  for (const SqlRow& row : *rows) names.push_back(row[0].value_or(""));
  return absl::NotFoundError(
      absl::StrCat(field, ": no stored run of suite ", Quote(suite), DidYouMean(suite, names)));
}

absl::StatusOr<std::vector<v1::StoredResult>> ResultStore::Select(const v1::ResultFilter& given,
                                                                  std::int64_t limit,
                                                                  std::int64_t offset,
                                                                  bool include_samples,
                                                                  const Viewer& viewer) {
  v1::ResultFilter filter = given;
  ASSIGN_OR_RETURN(*filter.mutable_run_id(), ResolveRunId(given.run_id(), "filter.run_id"));
  std::vector<SqlValue> params;
  // LENGTH before id: within a run, "RUN/2" comes before "RUN/10".
  const std::string sql =
      absl::StrCat(kSelectColumns, Where(filter, viewer, &params),
                   " ORDER BY r.created_at DESC, r.run_id DESC, LENGTH(r.id), r.id LIMIT ", limit,
                   " OFFSET ", offset);
  auto rows = db_->Query(sql, params);
  if (!rows.ok()) return rows.status();
  std::map<std::string, v1::BenchmarkReport> runs;  // parsed once per run
  std::vector<v1::StoredResult> out;
  for (const SqlRow& row : *rows) {
    v1::StoredResult s;
    s.set_id(row[0].value_or(""));
    s.set_run_id(row[1].value_or(""));
    s.set_created_unix_seconds(Int(row[2]));
    s.set_suite(row[3].value_or(""));
    s.set_suite_hash(row[4].value_or(""));
    s.set_server(row[5].value_or(""));
    if (absl::Status st = FromJson(row[6].value_or("{}"), s.mutable_result()); !st.ok()) return st;
    if (include_samples && row[7].has_value()) {
      for (double v : SamplesFromJson(*row[7])) s.mutable_result()->add_samples_seconds(v);
    }
    s.set_downsampled(Int(row[9]) != 0);
    if (row[8].has_value()) {
      for (double v : SamplesFromJson(*row[8])) s.add_quantiles_seconds(v);
    }
    auto [it, inserted] = runs.try_emplace(s.run_id());
    if (inserted) {
      if (absl::Status st = FromJson(row[10].value_or("{}"), &it->second); !st.ok()) return st;
    }
    const v1::BenchmarkReport& run = it->second;
    for (const auto& e : run.environments()) {
      if (e.device().name() == s.result().device()) *s.mutable_environment() = e;
    }
    v1::Receipt* receipt = s.mutable_receipt();
    *receipt->mutable_definition() = run.definition();
    receipt->set_suite_hash(s.suite_hash());
    *receipt->mutable_protocol() = run.protocol();
    receipt->set_implementation(s.result().implementation());
    if (s.result().implementation().rfind("sub-", 0) == 0) {
      receipt->set_submission_hash(s.result().implementation());
    }
    receipt->set_workload(s.result().workload());
    receipt->set_seed(run.protocol().seed());
    receipt->set_device_model(s.environment().device().model());
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<v1::HistoryResponse> ResultStore::History(const v1::HistoryRequest& request,
                                                         const Viewer& viewer) {
  std::int64_t offset = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &offset) || offset < 0)) {
    return absl::InvalidArgumentError("page_token: not a token this server returned");
  }
  const std::int64_t page = request.page_size() == 0 ? 50 : request.page_size();
  if (page > 1000) return absl::InvalidArgumentError("page_size: at most 1000");
  RETURN_IF_ERROR(CheckSuiteKnown(request.filter().suite(), "filter.suite"));
  if (request.runs()) return RunHistory(request, page, offset, viewer);
  // One row more than the page says whether another page follows.
  auto rows = Select(request.filter(), page + 1, offset, request.include_samples(), viewer);
  if (!rows.ok()) return rows.status();
  v1::HistoryResponse response;
  for (std::size_t i = 0; i < rows->size() && static_cast<std::int64_t>(i) < page; ++i) {
    *response.add_results() = std::move((*rows)[i]);
  }
  if (static_cast<std::int64_t>(rows->size()) > page) {
    response.set_next_page_token(std::to_string(offset + page));
  }
  return response;
}

// One row per run, newest first, counting the results the viewer sees; the filter's result
// terms pick the runs (a run shows when one of its results matches).
absl::StatusOr<v1::HistoryResponse> ResultStore::RunHistory(const v1::HistoryRequest& request,
                                                            std::int64_t page, std::int64_t offset,
                                                            const Viewer& viewer) {
  v1::ResultFilter filter = request.filter();
  ASSIGN_OR_RETURN(*filter.mutable_run_id(), ResolveRunId(filter.run_id(), "filter.run_id"));
  std::vector<SqlValue> params;
  const std::string sql = absl::StrCat(
      "SELECT runs.id, runs.created_at, runs.suite, runs.server, runs.complete, COUNT(r.id), "
      "MIN(r.device_model), MIN(r.sol_peak_source), MIN(r.sol_peak_bytes_per_second) FROM "
      "results r JOIN runs ON runs.id = r.run_id",
      Where(filter, viewer, &params),
      " GROUP BY runs.id, runs.created_at, runs.suite, runs.server, runs.complete ORDER BY "
      "runs.created_at DESC, runs.id DESC LIMIT ",
      page + 1, " OFFSET ", offset);
  auto rows = db_->Query(sql, params);
  if (!rows.ok()) return rows.status();
  v1::HistoryResponse response;
  for (std::size_t i = 0; i < rows->size() && static_cast<std::int64_t>(i) < page; ++i) {
    const SqlRow& row = (*rows)[i];
    v1::RunSummary* run = response.add_runs();
    run->set_run_id(row[0].value_or(""));
    run->set_created_unix_seconds(Int(row[1]));
    run->set_suite(row[2].value_or(""));
    run->set_server(row[3].value_or(""));
    run->set_complete(Int(row[4]) != 0);
    run->set_results(static_cast<std::uint32_t>(Int(row[5])));
    run->set_device_model(row[6].value_or(""));
    run->set_peak_source(static_cast<v1::PeakSource>(Int(row[7])));
    double peak = 0;
    (void)absl::SimpleAtod(row[8].value_or("0"), &peak);
    run->set_peak_bytes_per_second(peak);
  }
  if (static_cast<std::int64_t>(rows->size()) > page) {
    response.set_next_page_token(std::to_string(offset + page));
  }
  return response;
}

absl::StatusOr<v1::StoredResult> ResultStore::Get(const std::string& given_id,
                                                  const Viewer& viewer) {
  // "<run id or its prefix>/<index>"
  std::string result_id = given_id;
  if (const std::size_t slash = given_id.find('/'); slash != std::string::npos) {
    ASSIGN_OR_RETURN(std::string run, ResolveRunId(given_id.substr(0, slash), "result_id"));
    result_id = absl::StrCat(run, given_id.substr(slash));
  }
  auto rows = db_->Query(absl::StrCat(kSelectColumns, " WHERE r.id = $1"), {result_id});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError("no stored result");
  v1::ResultFilter filter;
  filter.set_run_id(rows->front()[1].value_or(""));
  auto run = Select(filter, 100000, 0, true, viewer);
  if (!run.ok()) return run.status();
  for (v1::StoredResult& s : *run) {
    if (s.id() == result_id) return std::move(s);
  }
  return absl::NotFoundError("no stored result");
}

absl::StatusOr<v1::LeaderboardResponse> ResultStore::Leaderboard(
    const v1::LeaderboardRequest& request, const Viewer& viewer) {
  RETURN_IF_ERROR(CheckSuiteKnown(request.suite(), "suite"));
  std::vector<SqlValue> params = {request.suite()};
  std::string sql =
      "SELECT r.run_id, r.implementation, r.submission_hash, r.device_model, r.status, "
      "r.sol_ratio, r.median_seconds, r.created_at, runs.server, r.workload, r.sol_peak_source, "
      "r.sol_peak_bytes_per_second FROM results r JOIN runs ON runs.id = r.run_id WHERE "
      "r.suite = $1";
  // One leaderboard, one suite content: a custom suite that took the name ranks elsewhere.
  if (const auto official = options_.official_suite_hashes.find(request.suite());
      official != options_.official_suite_hashes.end()) {
    params.push_back(official->second);
    sql += absl::StrCat(" AND runs.suite_hash = $", params.size());
  } else if (viewer.has_value()) {
    // A custom suite is its owner's: the content of the caller's newest run of that name
    // (else the newest anyone's), so that nobody resets another's board with a new content.
    params.push_back(*viewer);
    sql += absl::StrCat(
        " AND runs.suite_hash = (SELECT ru.suite_hash FROM runs ru WHERE ru.suite = $1 "
        "ORDER BY (EXISTS (SELECT 1 FROM results x WHERE x.run_id = ru.id AND x.owner = $",
        params.size(), ")) DESC, ru.created_at DESC, ru.id LIMIT 1)");
  } else {
    sql +=
        " AND runs.suite_hash = (SELECT suite_hash FROM runs WHERE suite = $1 "
        "ORDER BY created_at DESC, id LIMIT 1)";
  }
  if (!request.device_model().empty()) {
    params.push_back(Contains(request.device_model()));
    sql += absl::StrCat(" AND r.device_model LIKE $", params.size(), kLikeEscape);
  }
  if (std::string visible = VisibleTo(viewer, &params); !visible.empty()) {
    sql += absl::StrCat(" AND ", visible);
  }
  auto rows = db_->Query(sql, params);
  if (!rows.ok()) return rows.status();
  struct Group {
    v1::LeaderboardEntry entry;
    std::size_t passed = 0, total = 0;
    double log_sol = 0, median_sum = 0;
  };
  // (run, implementation, model) -> its results.
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  std::size_t workloads = 0;
  for (const SqlRow& row : *rows) {
    Group& g = groups[{row[0].value_or(""), row[1].value_or(""), row[3].value_or("")}];
    g.entry.set_run_id(row[0].value_or(""));
    g.entry.set_implementation(row[1].value_or(""));
    g.entry.set_submission_hash(row[2].value_or(""));
    g.entry.set_device_model(row[3].value_or(""));
    g.entry.set_created_unix_seconds(Int(row[7]));
    g.entry.set_server(row[8].value_or(""));
    ++g.total;
    double sol = 0, median = 0;
    (void)absl::SimpleAtod(row[5].value_or("0"), &sol);
    (void)absl::SimpleAtod(row[6].value_or("0"), &median);
    if (Int(row[4]) == v1::RESULT_STATUS_PASSED && sol > 0) {
      if (g.passed == 0) {
        double peak = 0;
        (void)absl::SimpleAtod(row[11].value_or("0"), &peak);
        g.entry.set_peak_source(static_cast<v1::PeakSource>(Int(row[10])));
        g.entry.set_peak_bytes_per_second(peak);
      }
      ++g.passed;
      g.log_sol += std::log(sol);
      g.median_sum += median;
    }
    workloads = std::max(workloads, g.total);
  }
  // A run counts when every workload of the suite passed (a partial re-run does not).
  std::vector<v1::LeaderboardEntry> complete;
  for (auto& [key, g] : groups) {
    if (g.total < workloads || g.passed != g.total) continue;
    g.entry.set_workloads(static_cast<std::uint32_t>(g.total));
    g.entry.set_geomean_sol_ratio(std::exp(g.log_sol / static_cast<double>(g.total)));
    g.entry.set_mean_latency_seconds(g.median_sum / static_cast<double>(g.total));
    complete.push_back(g.entry);
  }
  v1::LeaderboardResponse response;
  // SOL % ranks only on one scale: one peak per device model (models differ in peak by
  // design, and SOL is what makes them comparable). A model whose runs were measured against
  // different peaks makes the whole board rank by time.
  std::map<std::string, std::vector<SolPeak>> peaks_by_model;
  for (const v1::LeaderboardEntry& e : complete) {
    std::vector<SolPeak>& peaks = peaks_by_model[e.device_model()];
    const SolPeak p{e.peak_source(), e.peak_bytes_per_second()};
    bool seen = false;
    for (const SolPeak& q : peaks) seen |= SamePeak(p, q);
    if (!seen) peaks.push_back(p);
  }
  for (auto& [model, peaks] : peaks_by_model) {
    if (peaks.size() < 2) continue;
    // Lowest first: the note reads the same whichever run the query met first.
    std::sort(peaks.begin(), peaks.end(), [](const SolPeak& a, const SolPeak& b) {
      return std::tie(a.bytes_per_second, a.source) < std::tie(b.bytes_per_second, b.source);
    });
    response.set_ranked_by_latency(true);
    std::string text;
    for (const SolPeak& p : peaks) absl::StrAppend(&text, text.empty() ? "" : " vs ", PeakText(p));
    absl::StrAppend(response.mutable_peak_note(), response.peak_note().empty() ? "" : "; ",
                    model.empty() ? "unknown model" : model, ": SOL peaks differ (", text, ")");
  }
  if (response.ranked_by_latency()) {
    absl::StrAppend(response.mutable_peak_note(), ": ranked by mean latency, not SOL %");
  }
  const bool by_latency = response.ranked_by_latency();
  // Better: a higher geomean SOL, or (by latency) a lower mean latency.
  auto better = [by_latency](const v1::LeaderboardEntry& a, const v1::LeaderboardEntry& b) {
    return by_latency ? a.mean_latency_seconds() < b.mean_latency_seconds()
                      : a.geomean_sol_ratio() > b.geomean_sol_ratio();
  };
  std::map<std::pair<std::string, std::string>, v1::LeaderboardEntry> best;
  for (const v1::LeaderboardEntry& e : complete) {
    auto [slot, inserted] = best.try_emplace({e.implementation(), e.device_model()}, e);
    if (!inserted && better(e, slot->second)) slot->second = e;
  }
  std::vector<v1::LeaderboardEntry> ranked;
  for (auto& [key, e] : best) ranked.push_back(e);
  std::sort(ranked.begin(), ranked.end(), better);
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    ranked[i].set_rank(static_cast<std::uint32_t>(i + 1));
    ranked[i].set_vs_best(by_latency
                              ? ranked[i].mean_latency_seconds() / ranked[0].mean_latency_seconds()
                              : ranked[0].geomean_sol_ratio() / ranked[i].geomean_sol_ratio());
    *response.add_entries() = ranked[i];
  }
  return response;
}

absl::StatusOr<v1::CompareResponse> ResultStore::Compare(const v1::CompareRequest& request,
                                                         const Viewer& viewer) {
  const double alpha = request.alpha() == 0 ? 0.05 : request.alpha();
  const double min_relative =
      request.min_relative_difference() == 0 ? 0.01 : request.min_relative_difference();
  v1::ResultFilter base, cand;
  if (!request.baseline_run().empty() || !request.candidate_run().empty()) {
    ASSIGN_OR_RETURN(*base.mutable_run_id(), ResolveRunId(request.baseline_run(), "baseline_run"));
    ASSIGN_OR_RETURN(*cand.mutable_run_id(),
                     ResolveRunId(request.candidate_run(), "candidate_run"));
  } else {
    for (v1::ResultFilter* f : {&base, &cand}) {
      f->set_suite(request.suite());
      f->set_implementation(request.implementation());
      f->set_device_model(request.device_model());
    }
    base.set_since_unix_seconds(request.baseline_window().since_unix_seconds());
    base.set_until_unix_seconds(request.baseline_window().until_unix_seconds());
    cand.set_since_unix_seconds(request.candidate_window().since_unix_seconds());
    cand.set_until_unix_seconds(request.candidate_window().until_unix_seconds());
  }
  auto b = Select(base, 100000, 0, true, viewer);
  if (!b.ok()) return b.status();
  auto c = Select(cand, 100000, 0, true, viewer);
  if (!c.ok()) return c.status();
  if (b->empty()) return absl::NotFoundError("baseline: no stored results");
  if (c->empty()) return absl::NotFoundError("candidate: no stored results");
  // Pooled per (workload, implementation), oldest first, in the candidate's order.
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::vector<v1::StoredResult>> bs, cs;
  std::vector<Key> order;
  for (auto it = b->rbegin(); it != b->rend(); ++it) {
    bs[{it->result().workload(), it->result().implementation()}].push_back(*it);
  }
  for (auto it = c->rbegin(); it != c->rend(); ++it) {
    const Key key{it->result().workload(), it->result().implementation()};
    if (cs[key].empty()) order.push_back(key);
    cs[key].push_back(*it);
  }
  v1::CompareResponse response;
  for (const Key& key : order) {
    auto found = bs.find(key);
    if (found == bs.end()) continue;
    v1::SampleComparison cmp = CompareStored(found->second, cs[key], alpha, min_relative);
    Tally(cmp, &response);
    *response.add_comparisons() = std::move(cmp);
  }
  if (response.comparisons_size() == 0) {
    return absl::NotFoundError("no workload and implementation in common between the two sides");
  }
  return response;
}

absl::StatusOr<v1::ExportResponse> ResultStore::Export(const v1::ExportRequest& request,
                                                       const Viewer& viewer) {
  const std::int64_t limit = request.limit() == 0 ? 1000 : request.limit();
  if (limit > 100000) return absl::InvalidArgumentError("limit: at most 100000");
  // One row more than the limit says whether the export is cut short.
  auto rows = Select(request.filter(), limit + 1, 0, false, viewer);
  if (!rows.ok()) return rows.status();
  v1::ExportResponse response;
  if (static_cast<std::int64_t>(rows->size()) > limit) {
    rows->pop_back();
    response.set_truncated(true);
  }
  response.set_data(ExportRows(*rows, request.format()));
  response.set_rows(static_cast<std::uint32_t>(rows->size()));
  return response;
}

}  // namespace kerneleval::server::store
