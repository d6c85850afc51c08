// ResultStore's queries of stored results and runs: Select, History (per result and per
// run), Get, and the run-id prefixes and suite names they accept.
#include "server/store/result_store.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/bounded_text.h"
#include "common/did_you_mean.h"
#include "common/status_macros.h"
#include "common/submission_id.h"
#include "server/store/result_rows.h"
#include "server/store/result_store_sql.h"
#include "server/store/sample_statistics.h"

namespace kerneleval::server::store {

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

absl::Status ResultStore::CheckSuiteKnown(const std::string& suite, const std::string& field,
                                          const Viewer& viewer) {
  if (suite.empty() || options_.official_suite_hashes.count(suite) > 0) return absl::OkStatus();
  std::vector<SqlValue> params = {suite};
  const std::string visible = VisibleTo(viewer, &params);
  auto found = db_->Query(absl::StrCat("SELECT 1 FROM results r WHERE r.suite = $1",
                                       visible.empty() ? "" : " AND ", visible, " LIMIT 1"),
                          params);
  if (!found.ok()) return found.status();
  if (!found->empty()) return absl::OkStatus();
  // The names a typo is matched against: the served suites and the caller's own custom ones.
  // Another owner's suite name is never suggested: the suggestion would tell it.
  std::vector<SqlValue> own;
  std::string sql = "SELECT DISTINCT suite FROM results";
  if (viewer.has_value()) {
    own.push_back(*viewer);
    sql += " WHERE owner = $1";
  }
  auto rows = db_->Query(sql + " ORDER BY suite LIMIT 1000", own);
  if (!rows.ok()) return rows.status();
  std::vector<std::string> names;
  for (const auto& [name, hash] : options_.official_suite_hashes) names.push_back(name);
  for (const SqlRow& row : *rows) names.push_back(row[0].value_or(""));
  return absl::NotFoundError(
      absl::StrCat(field, ": no stored run of suite ", Quote(suite), DidYouMean(suite, names)));
}

bool ResultStore::OwnSuiteOf(const std::string& owner, const std::string& suite,
                             const std::string& suite_hash, const Viewer& viewer) const {
  if (!viewer.has_value() || owner == *viewer) return true;
  const auto official = options_.official_suite_hashes.find(suite);
  return official != options_.official_suite_hashes.end() && official->second == suite_hash;
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
    if (!OwnSuiteOf(row[11].value_or(""), s.suite(), s.suite_hash(), viewer)) {
      receipt->mutable_definition()->clear_description();
    }
    receipt->set_suite_hash(s.suite_hash());
    *receipt->mutable_protocol() = run.protocol();
    receipt->set_implementation(s.result().implementation());
    if (IsSubmissionId(s.result().implementation())) {
      receipt->set_submission_hash(s.result().implementation());
    }
    receipt->set_workload(s.result().workload());
    receipt->set_seed(run.protocol().seed());
    receipt->set_device_model(s.environment().device().model());
    if (row[12].has_value()) {
      v1::RegressionVerdict* g = s.mutable_regression();
      g->set_change(*row[12]);
      g->set_correctness_changed(Int(row[13]) != 0);
      const auto number = [&row](int column) {
        double value = 0;
        (void)absl::SimpleAtod(row[column].value_or("0"), &value);
        return value;
      };
      g->set_ratio(number(14));
      g->set_ratio_ci_low(number(15));
      g->set_ratio_ci_high(number(16));
      g->set_p_value(number(17));
      g->set_baseline_results(static_cast<std::uint32_t>(Int(row[18])));
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<v1::HistoryResponse> ResultStore::History(const v1::HistoryRequest& request,
                                                         const Viewer& viewer) {
  if (absl::Status connected = CheckConnected(); !connected.ok()) return connected;
  std::int64_t offset = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &offset) || offset < 0)) {
    return absl::InvalidArgumentError("page_token: not a token this server returned");
  }
  const std::int64_t page = request.page_size() == 0 ? 50 : request.page_size();
  if (page > 1000) return absl::InvalidArgumentError("page_size: at most 1000");
  RETURN_IF_ERROR(CheckSuiteKnown(request.filter().suite(), "filter.suite", viewer));
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
  std::string where = Where(filter, viewer, &params);
  if (request.complete_only())
    absl::StrAppend(&where, where.empty() ? " WHERE " : " AND ", "runs.complete = 1");
  const std::string sql = absl::StrCat(
      "SELECT runs.id, runs.created_at, runs.suite, runs.server, runs.complete, COUNT(r.id), "
      "MIN(r.device_model), MIN(r.sol_peak_source), MIN(r.sol_peak_bytes_per_second), "
      "runs.suite_hash, runs.report_json FROM results r JOIN runs ON runs.id = r.run_id",
      where,
      " GROUP BY runs.id, runs.created_at, runs.suite, runs.server, runs.complete, "
      "runs.suite_hash, runs.report_json, runs.created_at_us ORDER BY runs.created_at DESC, "
      "runs.created_at_us DESC, runs.id DESC LIMIT ",
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
    run->set_suite_hash(row[9].value_or(""));
    v1::BenchmarkReport header;
    if (absl::Status st = FromJson(row[10].value_or("{}"), &header); !st.ok()) return st;
    *run->mutable_protocol() = header.protocol();
  }
  if (static_cast<std::int64_t>(rows->size()) > page) {
    response.set_next_page_token(std::to_string(offset + page));
  }
  return response;
}

absl::StatusOr<v1::StoredResult> ResultStore::Get(const std::string& given_id,
                                                  const Viewer& viewer) {
  if (absl::Status connected = CheckConnected(); !connected.ok()) return connected;
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

absl::StatusOr<v1::BenchmarkReport> ResultStore::RunReport(const std::string& run_id,
                                                           const Viewer& viewer) {
  if (absl::Status connected = CheckConnected(); !connected.ok()) return connected;
  auto rows = db_->Query("SELECT report_json FROM runs WHERE id = $1", {run_id});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError(absl::StrCat("no stored run ", Quote(run_id)));
  v1::BenchmarkReport report;
  RETURN_IF_ERROR(FromJson(rows->front()[0].value_or("{}"), &report));
  v1::ResultFilter filter;
  filter.set_run_id(run_id);
  // A run holds at most the suite's workloads times its implementations and devices.
  constexpr std::int64_t kEveryResult = 1 << 20;
  ASSIGN_OR_RETURN(std::vector<v1::StoredResult> stored,
                   Select(filter, kEveryResult, 0, /*include_samples=*/true, viewer));
  for (v1::StoredResult& s : stored) *report.add_results() = std::move(*s.mutable_result());
  report.set_run_id(run_id);
  return report;
}

}  // namespace kerneleval::server::store
