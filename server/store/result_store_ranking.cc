// ResultStore's queries across runs: the leaderboard, the comparison of two sides, export.
#include "server/store/result_store.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"
#include "common/protocol.h"
#include "common/status_macros.h"
#include "server/store/comparability.h"
#include "server/store/compare_results.h"
#include "server/store/result_rows.h"
#include "server/store/result_store_sql.h"
#include "server/store/sample_statistics.h"
#include "server/store/sol_peaks.h"

namespace kerneleval::server::store {

namespace {

// What the board needs of a run beyond its results: its protocol label, and when it was
// stored (seconds, then microseconds: two runs of one second are still ordered).
struct RunHeader {
  std::string protocol;
  std::int64_t created_at = 0, created_at_us = 0;
};
using RunHeaders = std::map<std::string, RunHeader>;

// The protocol labels of `results`, each once, in order of first appearance.
std::string ProtocolsOf(const std::vector<v1::StoredResult>& results) {
  std::vector<std::string> labels;
  for (const v1::StoredResult& r : results) {
    std::string label = ProtocolLabel(r.receipt().protocol());
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) {
      labels.push_back(std::move(label));
    }
  }
  return absl::StrJoin(labels, ",");
}

// The leaderboard's rows (one per result: run, implementation, submission hash, model,
// status, SOL, median, time, server, workload, peak source, peak) as one entry per run,
// implementation and model, for the runs in which every workload of the suite passed (a
// partial re-run does not count), each with its run's protocol.
std::vector<v1::LeaderboardEntry> CompleteRuns(const std::vector<SqlRow>& rows,
                                               const RunHeaders& runs) {
  struct Group {
    v1::LeaderboardEntry entry;
    std::size_t passed = 0, total = 0;
    double log_sol = 0, median_sum = 0;
  };
  // (run, implementation, model) -> its results.
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  std::size_t workloads = 0;
  for (const SqlRow& row : rows) {
    Group& g = groups[{row[0].value_or(""), row[1].value_or(""), row[3].value_or("")}];
    g.entry.set_run_id(row[0].value_or(""));
    g.entry.set_implementation(row[1].value_or(""));
    g.entry.set_submission_hash(row[2].value_or(""));
    g.entry.set_device_model(row[3].value_or(""));
    g.entry.set_created_unix_seconds(Int(row[7]));
    g.entry.set_server(row[8].value_or(""));
    if (const auto run = runs.find(row[0].value_or("")); run != runs.end()) {
      g.entry.set_protocol(run->second.protocol);
    }
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
  std::vector<v1::LeaderboardEntry> complete;
  for (auto& [key, g] : groups) {
    if (g.total < workloads || g.passed != g.total) continue;
    g.entry.set_workloads(static_cast<std::uint32_t>(g.total));
    g.entry.set_geomean_sol_ratio(std::exp(g.log_sol / static_cast<double>(g.total)));
    g.entry.set_mean_latency_seconds(g.median_sum / static_cast<double>(g.total));
    complete.push_back(g.entry);
  }
  return complete;
}

// One board per protocol: the entries of `wanted` (else of the newest complete run's
// protocol), the response naming it and the others.
std::vector<v1::LeaderboardEntry> OneProtocol(const std::vector<v1::LeaderboardEntry>& complete,
                                              const RunHeaders& runs, const std::string& wanted,
                                              v1::LeaderboardResponse* response) {
  std::string protocol = wanted;
  if (protocol.empty()) {
    auto stored = [&runs](const v1::LeaderboardEntry& e) {
      // A run retention removed between the two queries sorts oldest.
      const auto h = runs.find(e.run_id());
      return h == runs.end()
                 ? std::make_tuple(std::int64_t{0}, std::int64_t{0}, e.run_id())
                 : std::make_tuple(h->second.created_at, h->second.created_at_us, e.run_id());
    };
    const v1::LeaderboardEntry* newest = nullptr;
    for (const v1::LeaderboardEntry& e : complete) {
      if (newest == nullptr || stored(e) > stored(*newest)) newest = &e;
    }
    if (newest != nullptr) protocol = newest->protocol();
  }
  response->set_protocol(protocol);
  std::set<std::string> others;
  std::vector<v1::LeaderboardEntry> board;
  for (const v1::LeaderboardEntry& e : complete) {
    if (e.protocol() == protocol) {
      board.push_back(e);
    } else {
      others.insert(e.protocol());
    }
  }
  for (const std::string& o : others) response->add_other_protocols(o);
  return board;
}

// SOL % ranks only on one scale: one peak per device model (models differ in peak by
// design, and SOL is what makes them comparable). A model whose runs were measured against
// different peaks makes the whole board rank by time, and the note says why.
void NotePeaks(const std::vector<v1::LeaderboardEntry>& complete,
               v1::LeaderboardResponse* response) {
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
    response->set_ranked_by_latency(true);
    std::string text;
    for (const SolPeak& p : peaks) absl::StrAppend(&text, text.empty() ? "" : " vs ", PeakText(p));
    absl::StrAppend(response->mutable_peak_note(), response->peak_note().empty() ? "" : "; ",
                    model.empty() ? "unknown model" : model, ": SOL peaks differ (", text, ")");
  }
  if (response->ranked_by_latency()) {
    absl::StrAppend(response->mutable_peak_note(), ": ranked by mean latency, not SOL %");
  }
}

// The best run of each implementation on each model, ranked, with its distance to the best.
void Rank(const std::vector<v1::LeaderboardEntry>& complete, v1::LeaderboardResponse* response) {
  const bool by_latency = response->ranked_by_latency();
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
    *response->add_entries() = ranked[i];
  }
}

}  // namespace

absl::StatusOr<v1::LeaderboardResponse> ResultStore::Leaderboard(
    const v1::LeaderboardRequest& request, const Viewer& viewer) {
  if (absl::Status connected = CheckConnected(); !connected.ok()) return connected;
  RETURN_IF_ERROR(CheckSuiteKnown(request.suite(), "suite", viewer));
  if (!request.protocol().empty() && !IsProtocolLabel(request.protocol())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "protocol: ", Quote(request.protocol()),
        " is not a protocol label: hot or cold, then _graph, _rotate, _custom as measured "
        "(\"cold\", \"hot_graph\", \"cold_rotate_custom\")"));
  }
  std::vector<SqlValue> params = {request.suite()};
  // The board's results: FROM results r JOIN runs, then this condition.
  std::string sql = " WHERE r.suite = $1";
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
  constexpr char kJoin[] = " FROM results r JOIN runs ON runs.id = r.run_id";
  auto rows = db_->Query(
      absl::StrCat("SELECT r.run_id, r.implementation, r.submission_hash, r.device_model, "
                   "r.status, r.sol_ratio, r.median_seconds, r.created_at, runs.server, "
                   "r.workload, r.sol_peak_source, r.sol_peak_bytes_per_second",
                   kJoin, sql),
      params);
  if (!rows.ok()) return rows.status();
  // Each run's protocol, from its stored report (one row per run, not per result).
  auto runs = db_->Query(absl::StrCat("SELECT id, report_json, created_at, created_at_us FROM runs "
                                      "WHERE id IN (SELECT r.run_id",
                                      kJoin, sql, ")"),
                         params);
  if (!runs.ok()) return runs.status();
  RunHeaders headers;
  for (const SqlRow& run : *runs) {
    v1::BenchmarkReport report;
    RETURN_IF_ERROR(FromJson(run[1].value_or("{}"), &report));
    headers[run[0].value_or("")] = {ProtocolLabel(report.protocol()), Int(run[2]), Int(run[3])};
  }
  v1::LeaderboardResponse response;
  const std::vector<v1::LeaderboardEntry> board =
      OneProtocol(CompleteRuns(*rows, headers), headers, request.protocol(), &response);
  NotePeaks(board, &response);
  Rank(board, &response);
  return response;
}

absl::StatusOr<std::string> ResultStore::PreviousRun(const std::string& candidate) {
  auto rows = db_->Query(
      "SELECT created_at, suite, suite_hash, report_json, created_at_us FROM runs WHERE id = $1",
      {candidate});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::NotFoundError(absl::StrCat("candidate_run: no run ", Quote(candidate)));
  }
  const SqlRow& c = rows->front();
  v1::BenchmarkReport header;
  RETURN_IF_ERROR(FromJson(c[3].value_or("{}"), &header));
  const std::string protocol = ProtocolIdentity(header.protocol());
  // Newest first: stored before the candidate (within its second too, by created_at_us).
  auto earlier = db_->Query(
      "SELECT id, report_json FROM runs WHERE suite_hash = $1 AND complete = 1 AND id <> $2 AND "
      "(created_at < $3 OR (created_at = $3 AND created_at_us <= $4)) "
      "ORDER BY created_at DESC, created_at_us DESC, id DESC LIMIT 1000",
      {c[2].value_or(""), candidate, Int(c[0]), Int(c[4])});
  if (!earlier.ok()) return earlier.status();
  for (const SqlRow& row : *earlier) {
    v1::BenchmarkReport other;
    RETURN_IF_ERROR(FromJson(row[1].value_or("{}"), &other));
    if (ProtocolIdentity(other.protocol()) == protocol) return row[0].value_or("");
  }
  return absl::NotFoundError(absl::StrCat("baseline_previous: no complete run of suite ",
                                          Quote(c[1].value_or("")), " before ", candidate,
                                          " with the same suite content and protocol"));
}

absl::StatusOr<v1::CompareResponse> ResultStore::Compare(const v1::CompareRequest& request,
                                                         const Viewer& viewer) {
  if (absl::Status connected = CheckConnected(); !connected.ok()) return connected;
  const double alpha = request.alpha() == 0 ? 0.05 : request.alpha();
  const double min_relative =
      request.min_relative_difference() == 0 ? 0.01 : request.min_relative_difference();
  v1::ResultFilter base, cand;
  if (request.baseline_previous()) {
    if (request.candidate_run().empty() || !request.baseline_run().empty()) {
      return absl::InvalidArgumentError(
          "baseline_previous: give candidate_run and no baseline_run");
    }
    ASSIGN_OR_RETURN(*cand.mutable_run_id(),
                     ResolveRunId(request.candidate_run(), "candidate_run"));
    ASSIGN_OR_RETURN(*base.mutable_run_id(), PreviousRun(cand.run_id()));
  } else if (!request.baseline_run().empty() || !request.candidate_run().empty()) {
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
  response.set_baseline_run(base.run_id());
  response.set_candidate_run(cand.run_id());
  response.set_baseline_protocol(ProtocolsOf(*b));
  response.set_candidate_protocol(ProtocolsOf(*c));
  auto add_missing = [&response](const Key& key, const char* missing_from) {
    v1::MissingRow* m = response.add_missing();
    m->set_workload(key.first);
    m->set_implementation(key.second);
    m->set_missing_from(missing_from);
  };
  for (const Key& key : order) {
    auto found = bs.find(key);
    if (found == bs.end()) {
      add_missing(key, "baseline");
      continue;
    }
    v1::SampleComparison cmp = CompareStored(found->second, cs[key], alpha, min_relative);
    Tally(cmp, &response);
    *response.add_comparisons() = std::move(cmp);
  }
  // What the baseline had and the candidate dropped, in the baseline's order: silence here
  // would let a gate pass on an implementation that no longer runs.
  for (auto it = b->rbegin(); it != b->rend(); ++it) {
    const Key key{it->result().workload(), it->result().implementation()};
    if (cs.count(key) > 0) continue;
    cs[key];  // listed once
    add_missing(key, "candidate");
  }
  return response;
}

absl::StatusOr<v1::ExportResponse> ResultStore::Export(const v1::ExportRequest& request,
                                                       const Viewer& viewer) {
  if (absl::Status connected = CheckConnected(); !connected.ok()) return connected;
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
