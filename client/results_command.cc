#include "client/results_command.h"

#include <algorithm>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_output.h"
#include "client/report_format.h"
#include "client/report_internal.h"
#include "client/results_client.h"
#include "client/text_table.h"
#include "common/bounded_text.h"
#include "common/enum_names.h"
#include "common/protocol.h"

namespace kerneleval::client::cli {
namespace {

// How history, leaderboard and compare print times (UTC).
constexpr char kWhenFormat[] = "%Y-%m-%d %H:%M:%S";

// Unix seconds, the printed form, YYYY-MM-DD or RFC 3339; 0 for empty.
absl::StatusOr<std::int64_t> ParseWhen(const std::string& flag, const std::string& text) {
  if (text.empty()) return 0;
  std::int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) return seconds;
  absl::Time t;
  std::string error;
  // kWhenFormat first: the time history prints is accepted back as it is.
  if (absl::ParseTime(kWhenFormat, text, absl::UTCTimeZone(), &t, &error) ||
      absl::ParseTime("%Y-%m-%dT%H:%M:%S", text, absl::UTCTimeZone(), &t, &error) ||
      absl::ParseTime(absl::RFC3339_full, text, &t, &error) ||
      absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &error)) {
    return absl::ToUnixSeconds(t);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": ", Quote(text),
                   " is not Unix seconds, YYYY-MM-DD, 'YYYY-MM-DD HH:MM:SS' (UTC) or RFC 3339"));
}

std::string When(std::int64_t unix_seconds) {
  return absl::FormatTime(kWhenFormat, absl::FromUnixSeconds(unix_seconds), absl::UTCTimeZone());
}

std::string ThresholdText(double threshold) {
  return absl::StrCat("+-", absl::StrFormat("%g", threshold * 100), "%");
}

std::string VerdictText(const v1::SampleComparison& c) {
  switch (c.verdict()) {
    case v1::VERDICT_SAME:
      return absl::StrCat("same (within ", ThresholdText(c.threshold()), ")");
    case v1::VERDICT_FASTER:
      return "FASTER";
    case v1::VERDICT_SLOWER:
      return "SLOWER";
    case v1::VERDICT_INCONCLUSIVE:
      return "inconclusive";
    case v1::VERDICT_NOISY:
      return absl::StrCat("noisy (a change within the noise, ", ThresholdText(c.noise()),
                          ": not called)");
    default:
      return absl::StrCat("not comparable: ", c.incomparable_reason());
  }
}

// The --fail-on word of a verdict ("slower", "inconclusive", "incomparable"); empty for the
// verdicts that never fail a job.
std::string FailWord(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_SLOWER:
      return "slower";
    case v1::VERDICT_INCONCLUSIVE:
      return "inconclusive";
    case v1::VERDICT_INCOMPARABLE:
      return "incomparable";
    case v1::VERDICT_NOISY:
      return "noisy";
    default:
      return "";
  }
}

// The verdicts a gate fails on when --fail-on is not given: a slower row, and rows that are
// missing from the candidate or cannot be compared (a gate that passes on "not comparable"
// passes on nothing).
const std::vector<std::string>& DefaultFailOn() {
  static const std::vector<std::string> words = {"slower", "incomparable", "missing"};
  return words;
}

}  // namespace

std::vector<std::string> EffectiveFailOn(const std::vector<std::string>& given) {
  if (given.empty()) return DefaultFailOn();
  std::vector<std::string> words;
  for (const std::string& w : given) {
    if (w != "none") words.push_back(w);
  }
  return words;
}

int FailOn(const std::vector<std::string>& fail_on,
           const google::protobuf::RepeatedPtrField<v1::SampleComparison>& rows,
           const google::protobuf::RepeatedPtrField<v1::MissingRow>& missing, std::ostream& err) {
  int rc = kExitOk;
  for (const std::string& word : fail_on) {
    int n = 0;
    if (word == "missing") {
      for (const v1::MissingRow& m : missing) n += m.missing_from() == "candidate" ? 1 : 0;
    } else {
      for (const v1::SampleComparison& c : rows) n += FailWord(c.verdict()) == word ? 1 : 0;
    }
    if (n == 0) continue;
    err << "error: --fail-on " << word << ": " << n << (n == 1 ? " comparison " : " comparisons ")
        << (word == "incomparable" ? "not comparable"
            : word == "missing"    ? "missing from the candidate"
                                   : word)
        << "\n";
    rc = kExitRegression;
  }
  return rc;
}

namespace {

// A side's spread: its interquartile range relative to its median.
std::string Spread(double iqr, double median) {
  if (median <= 0) return "-";
  return absl::StrCat(Fixed(iqr / median * 100, 1), "%");
}

std::string Percent(double ratio) {
  if (ratio <= 0) return "-";
  return absl::StrCat(ratio >= 1 ? "+" : "", Fixed((ratio - 1) * 100, 2), "%");
}

void AddComparisonRow(TextTable* table, const v1::SampleComparison& c) {
  const bool measured = c.ratio() > 0;
  table->AddRow(
      {c.workload(), c.implementation(),
       measured ? FormatSeconds(c.baseline_median_seconds()) : "-",
       std::to_string(c.baseline_samples()),
       Spread(c.baseline_iqr_seconds(), c.baseline_median_seconds()),
       measured ? FormatSeconds(c.candidate_median_seconds()) : "-",
       std::to_string(c.candidate_samples()),
       Spread(c.candidate_iqr_seconds(), c.candidate_median_seconds()), Percent(c.ratio()),
       c.ratio() > 0
           ? absl::StrCat("[", Fixed(c.ratio_ci_low(), 4), ", ", Fixed(c.ratio_ci_high(), 4), "]")
           : "-",
       c.ratio() > 0 ? absl::StrFormat("%.3g", c.p_value()) : "-",
       absl::StrCat(VerdictText(c), c.correctness_changed() ? " (correctness changed)" : "")});
}

// Each side's median, sample count and IQR (relative to the median), then the change.
TextTable ComparisonTable() {
  return TextTable({"workload", "implementation", "baseline", "n", "IQR", "candidate", "n", "IQR",
                    "change", "ratio 95% CI", "p", "verdict"});
}

absl::StatusOr<v1::ResultFilter> Filter(const ResultsFlags& f) {
  v1::ResultFilter filter;
  filter.set_suite(f.suite);
  filter.set_workload(f.workload);
  filter.set_implementation(f.implementation);
  filter.set_device_model(f.gpu);
  filter.set_run_id(f.run);
  filter.set_protocol(f.protocol);
  auto since = ParseWhen("--since", f.since);
  if (!since.ok()) return since.status();
  auto until = ParseWhen("--until", f.until);
  if (!until.ok()) return until.status();
  filter.set_since_unix_seconds(*since);
  filter.set_until_unix_seconds(*until);
  return filter;
}

void AddFilterFlags(CLI::App* command, ResultsFlags* f) {
  command->add_option("--suite", f->suite, "Suite name");
  command->add_option("--workload", f->workload, "Workload name, e.g. batch_size=79");
  command->add_option("--impl", f->implementation, "Implementation (or submission id)");
  command->add_option("--gpu", f->gpu, "Device model, a substring: H200");
  command->add_option("--run", f->run, "One run id");
  command->add_option("--protocol", f->protocol,
                      "Only results of this protocol, as labelled: cold, hot, hot_graph, "
                      "cold_rotate, ..._custom");
  command->add_option("--since", f->since, "From this time (Unix seconds, YYYY-MM-DD, RFC 3339)");
  command->add_option("--until", f->until, "Before this time");
}

// "9.29 GB/s (measured_copy)", or "-" when the run has no SOL figure.
std::string PeakText(v1::PeakSource source, double bytes_per_second) {
  if (source == v1::PEAK_SOURCE_UNSPECIFIED || !(bytes_per_second > 0)) return "-";
  return absl::StrFormat("%.2f GB/s (%s)", bytes_per_second / 1e9, PeakSourceShortName(source));
}

int History(const ResultsClient& client, const CliConfig& config, const ResultsFlags& f,
            std::ostream& out, std::ostream& err) {
  v1::HistoryRequest request;
  auto filter = Filter(f);
  if (!filter.ok()) {
    err << "error: " << filter.status().message() << "\n";
    return kExitUsage;
  }
  *request.mutable_filter() = *filter;
  request.set_page_size(f.page_size);
  request.set_page_token(f.page_token);
  request.set_include_samples(f.samples);
  request.set_runs(f.list_runs);
  request.set_complete_only(f.complete_only);
  v1::HistoryResponse response;
  if (grpc::Status s = client.History(request, &response); !s.ok()) return RpcError(err, s);
  if (config.global.json) return PrintJson(config.global, out, err, response);
  if (f.list_runs) {
    TextTable table({"run", "time (UTC)", "suite", "results", "complete", "device", "SOL peak",
                     "server", "protocol"});
    for (const v1::RunSummary& r : response.runs()) {
      table.AddRow({r.run_id(), When(r.created_unix_seconds()), r.suite(),
                    std::to_string(r.results()), r.complete() ? "yes" : "NO (cut short)",
                    r.device_model(), PeakText(r.peak_source(), r.peak_bytes_per_second()),
                    r.server(), r.has_protocol() ? ProtocolText(r.protocol()) : std::string("-")});
    }
    out << table.Render();
    if (!response.next_page_token().empty()) {
      out << "more: --page-token " << response.next_page_token() << "\n";
    }
    return kExitOk;
  }
  out << FormatHistory(response);
  if (!response.next_page_token().empty()) {
    out << "more: --page-token " << response.next_page_token() << "\n";
  }
  return kExitOk;
}

int Leaderboard(const ResultsClient& client, const CliConfig& config, const ResultsFlags& f,
                std::ostream& out, std::ostream& err) {
  v1::LeaderboardRequest request;
  request.set_suite(f.suite);
  request.set_device_model(f.gpu);
  request.set_protocol(f.protocol);
  v1::LeaderboardResponse response;
  if (grpc::Status s = client.Leaderboard(request, &response); !s.ok()) return RpcError(err, s);
  if (config.global.json) return PrintJson(config.global, out, err, response);
  TextTable table({"rank", "implementation", "device", "SOL % (geomean)", "SOL peak",
                   "mean latency", "vs best", "workloads", "run", "server", "time (UTC)"});
  for (const v1::LeaderboardEntry& e : response.entries()) {
    table.AddRow({std::to_string(e.rank()), e.implementation(), e.device_model(),
                  Fixed(e.geomean_sol_ratio() * 100, 1),
                  PeakText(e.peak_source(), e.peak_bytes_per_second()),
                  FormatSeconds(e.mean_latency_seconds()), absl::StrCat(Fixed(e.vs_best(), 3), "x"),
                  std::to_string(e.workloads()), e.run_id(), e.server(),
                  When(e.created_unix_seconds())});
  }
  out << "leaderboard " << f.suite << (f.gpu.empty() ? "" : " on " + f.gpu) << ", protocol "
      << (response.protocol().empty() ? "-" : response.protocol())
      << (response.ranked_by_latency() ? ", ranked by mean latency" : ", ranked by geomean SOL")
      << "\n"
      << table.Render();
  if (!response.peak_note().empty()) out << response.peak_note() << "\n";
  if (response.other_protocols_size() > 0) {
    out << "also measured with other protocols (a board each, --protocol): "
        << absl::StrJoin(response.other_protocols(), ", ") << "\n";
  }
  return kExitOk;
}

int Compare(const ResultsClient& client, const CliConfig& config, const ResultsFlags& f,
            std::ostream& out, std::ostream& err) {
  v1::CompareRequest request;
  if (f.runs.size() == 2 && f.runs[0] == "previous") {
    request.set_baseline_previous(true);
    request.set_candidate_run(f.runs[1]);
  } else if (f.runs.size() == 2) {
    request.set_baseline_run(f.runs[0]);
    request.set_candidate_run(f.runs[1]);
  } else {
    request.set_implementation(f.implementation);
    request.set_suite(f.suite);
    request.set_device_model(f.gpu);
    auto bs = ParseWhen("--baseline-since", f.baseline_since);
    auto bu = ParseWhen("--baseline-until", f.baseline_until);
    auto cs = ParseWhen("--candidate-since", f.candidate_since);
    auto cu = ParseWhen("--candidate-until", f.candidate_until);
    for (const auto* parsed : {&bs, &bu, &cs, &cu}) {
      if (!parsed->ok()) {
        err << "error: " << parsed->status().message() << "\n";
        return kExitUsage;
      }
    }
    request.mutable_baseline_window()->set_since_unix_seconds(*bs);
    request.mutable_baseline_window()->set_until_unix_seconds(*bu);
    request.mutable_candidate_window()->set_since_unix_seconds(*cs);
    request.mutable_candidate_window()->set_until_unix_seconds(*cu);
  }
  request.set_alpha(f.alpha);
  request.set_min_relative_difference(f.threshold);
  v1::CompareResponse response;
  if (grpc::Status s = client.Compare(request, &response); !s.ok()) return RpcError(err, s);
  return PrintComparison(config, response, f, out, err);
}

int Reproduce(const ResultsClient& client, const CliConfig& config, const ResultsFlags& f,
              std::ostream& out, std::ostream& err) {
  v1::ReproduceRequest request;
  request.set_result_id(f.runs.empty() ? "" : f.runs[0]);
  request.set_device(f.device);
  request.set_alpha(f.alpha);
  v1::ReproduceResponse response;
  if (grpc::Status s = client.Reproduce(request, &response); !s.ok()) return RpcError(err, s);
  google::protobuf::RepeatedPtrField<v1::SampleComparison> rows;
  *rows.Add() = response.comparison();
  if (config.global.json) {
    if (int rc = PrintJson(config.global, out, err, response); rc != kExitOk) return rc;
    return FailOn(f.fail_on, rows, {}, err);
  }
  const v1::Receipt& receipt = response.original().receipt();
  out << "reproduced " << response.original().id() << ": suite " << response.original().suite()
      << " (" << receipt.suite_hash().substr(0, 12) << "), seed " << receipt.seed() << ", "
      << response.reproduced().measured_as() << " on " << response.reproduced().device() << "\n";
  TextTable table = ComparisonTable();
  AddComparisonRow(&table, response.comparison());
  out << table.Render();
  return FailOn(f.fail_on, rows, {}, err);
}

int Export(const ResultsClient& client, const ResultsFlags& f, std::ostream& out,
           std::ostream& err) {
  v1::ExportRequest request;
  auto filter = Filter(f);
  if (!filter.ok()) {
    err << "error: " << filter.status().message() << "\n";
    return kExitUsage;
  }
  *request.mutable_filter() = *filter;
  request.set_format(f.format == "csv"     ? v1::EXPORT_FORMAT_CSV
                     : f.format == "trace" ? v1::EXPORT_FORMAT_TRACE_JSONL
                                           : v1::EXPORT_FORMAT_JSONL);
  request.set_limit(f.export_limit);
  v1::ExportResponse response;
  if (grpc::Status s = client.Export(request, &response); !s.ok()) return RpcError(err, s);
  if (response.truncated()) {
    err << "export: truncated: more results match than --limit " << response.rows()
        << "; the newest " << response.rows() << " are exported\n";
  }
  if (f.out.empty()) {
    out << response.data();
    return kExitOk;
  }
  std::ofstream file(f.out, std::ios::binary);
  file << response.data();
  if (!file) {
    err << "error: --out: cannot write '" << f.out << "'\n";
    return kExitUsage;
  }
  err << response.rows() << " rows written to " << f.out << "\n";
  return kExitOk;
}

}  // namespace

int PrintComparison(const CliConfig& config, const v1::CompareResponse& response,
                    const ResultsFlags& f, std::ostream& out, std::ostream& err) {
  const std::vector<std::string> fail_on = EffectiveFailOn(f.fail_on);
  if (config.global.json) {
    if (int rc = PrintJson(config.global, out, err, response); rc != kExitOk) return rc;
    return FailOn(fail_on, response.comparisons(), response.missing(), err);
  }
  if (!response.baseline_run().empty()) {
    out << "baseline " << response.baseline_run() << ", candidate " << response.candidate_run()
        << "\n";
  }
  // Which protocol each side measured: rows of two protocols are not comparable.
  if (!response.baseline_protocol().empty()) {
    out << "protocol: baseline " << response.baseline_protocol() << ", candidate "
        << response.candidate_protocol() << "\n";
  }
  TextTable table = ComparisonTable();
  std::vector<std::string> peak_notes;
  for (const v1::SampleComparison& c : response.comparisons()) {
    AddComparisonRow(&table, c);
    if (!c.peak_difference().empty() &&
        std::find(peak_notes.begin(), peak_notes.end(), c.peak_difference()) == peak_notes.end()) {
      peak_notes.push_back(c.peak_difference());
    }
  }
  out << table.Render();
  for (const std::string& note : peak_notes) out << note << "\n";
  int dropped = 0;
  for (const v1::MissingRow& m : response.missing()) {
    const bool from_candidate = m.missing_from() == "candidate";
    dropped += from_candidate ? 1 : 0;
    out << (from_candidate ? "MISSING from the candidate: "
                           : "new in the candidate (no baseline): ")
        << m.workload() << " " << m.implementation() << "\n";
  }
  out << response.faster() << " faster, " << response.slower() << " slower, " << response.same()
      << " no significant difference (within " << ThresholdText(f.threshold) << " or the noise), "
      << response.inconclusive() << " inconclusive, " << response.noisy() << " noisy, "
      << response.incomparable() << " not comparable, " << dropped
      << " missing (Mann-Whitney U at alpha " << f.alpha
      << " and the 95% bootstrap CI of the ratio of medians against the threshold)\n";
  return FailOn(fail_on, response.comparisons(), response.missing(), err);
}

namespace {

// The verdict the server reached when the result arrived: "slower x1.23", "same x1.00",
// "correctness changed"; "-" for a series' first result.
std::string VersusBaseline(const v1::StoredResult& s) {
  if (!s.has_regression()) return "-";
  const v1::RegressionVerdict& g = s.regression();
  std::string text = g.baseline_results() > 0 && g.ratio() > 0
                         ? absl::StrCat(g.change(), " x", Fixed(g.ratio(), 2))
                         : "no baseline";
  if (g.correctness_changed()) text += ", correctness changed";
  return text;
}

}  // namespace

std::string FormatHistory(const v1::HistoryResponse& response) {
  TextTable table({"result", "time (UTC)", "suite", "workload", "implementation", "device",
                   "status", "median", "SOL %", "samples", "vs baseline"});
  for (const v1::StoredResult& s : response.results()) {
    const v1::WorkloadResult& r = s.result();
    const v1::SolFigure* sol = PreferredSol(r.sol());
    table.AddRow(
        {s.id(), When(s.created_unix_seconds()), s.suite(), r.workload(), r.implementation(),
         s.environment().device().model().empty() ? r.device() : s.environment().device().model(),
         ResultStatusShortName(r.status()), FormatSeconds(r.latency().median_seconds()),
         sol != nullptr && sol->sol_ratio() > 0 ? Fixed(sol->sol_ratio() * 100, 1) : "-",
         absl::StrCat(r.latency().samples(), s.downsampled() ? " (q)" : ""), VersusBaseline(s)});
  }
  std::string text = table.Render();
  for (const v1::StoredResult& s : response.results()) {
    const v1::SolFigure* sol = PreferredSol(s.result().sol());
    if (sol != nullptr && sol->above_peak()) {
      absl::StrAppend(&text, s.id(), ": SOL above 100 %: ", sol->above_peak_reason(), "\n");
    }
  }
  return text;
}

ResultsFlags* ProcessResultsFlags() {
  static ResultsFlags flags;
  return &flags;
}

void AddResultsCommands(CLI::App* app, ResultsFlags* f) {
  *f = ResultsFlags();  // a new app starts from the defaults
  CLI::App* history = app->add_subcommand("history", "Stored benchmark results, newest first");
  AddFilterFlags(history, f);
  history->add_option("--limit", f->page_size, "Results per page (max 1000)")
      ->capture_default_str();
  history->add_option("--page-token", f->page_token, "The token a previous page printed");
  history->add_flag("--samples", f->samples, "Include raw samples (with --json)");
  history->add_flag("--runs", f->list_runs,
                    "One row per run (id, time, suite, results, complete, protocol), newest "
                    "first");
  history
      ->add_flag("--complete", f->complete_only,
                 "Only runs that measured everything they were asked to (with --runs)")
      ->needs("--runs");

  CLI::App* leaderboard =
      app->add_subcommand("leaderboard", "The best passing run per implementation of a suite");
  leaderboard->add_option("--suite", f->suite, "Suite name")->required();
  leaderboard->add_option("--gpu", f->gpu, "Device model, a substring: H200");
  leaderboard->add_option("--protocol", f->protocol,
                          "The protocol to rank, as labelled: cold, hot, hot_graph, "
                          "cold_rotate, ..._custom (default: that of the newest complete run)");

  CLI::App* compare = app->add_subcommand(
      "compare", "Two runs (or an implementation across two time windows), workload by workload");
  compare
      ->add_option("runs", f->runs,
                   "BASELINE_RUN CANDIDATE_RUN; BASELINE_RUN 'previous': the newest complete "
                   "run before the candidate of the same suite content and protocol")
      ->expected(0, 2);
  compare->add_option("--impl", f->implementation, "Implementation (with windows)");
  compare->add_option("--suite", f->suite, "Suite (with --impl)");
  compare->add_option("--gpu", f->gpu, "Device model (with --impl)");
  compare->add_option("--baseline-since", f->baseline_since, "Baseline window start");
  compare->add_option("--baseline-until", f->baseline_until, "Baseline window end");
  compare->add_option("--candidate-since", f->candidate_since, "Candidate window start");
  compare->add_option("--candidate-until", f->candidate_until, "Candidate window end");
  compare->add_option("--alpha", f->alpha, "Significance level")
      ->check(CLI::Range(0.0001, 0.5))
      ->capture_default_str();
  compare
      ->add_option("--threshold", f->threshold,
                   "Practical threshold t: a change is called only when its 95% CI lies beyond "
                   "1 +- t, 'same' only when within")
      ->check(CLI::Range(0.0001, 0.5))
      ->capture_default_str();
  compare
      ->add_option("--fail-on", f->fail_on,
                   "Exit with code 1 (regression) when a comparison is one of these: "
                   "slower,inconclusive,incomparable,missing (missing from the candidate),noisy; "
                   "default slower,incomparable,missing; none: never")
      ->delimiter(',')
      ->check(
          CLI::IsMember({"slower", "inconclusive", "incomparable", "missing", "noisy", "none"}));

  CLI::App* reproduce = app->add_subcommand(
      "reproduce", "Re-run a stored result's receipt on this server and compare");
  reproduce->add_option("result", f->runs, "RESULT_ID (from history)")->expected(1)->required();
  reproduce->add_option("--device", f->device, "cpu, cuda:0, ... (default: least loaded)");
  reproduce->add_option("--alpha", f->alpha, "Significance level")
      ->check(CLI::Range(0.0001, 0.5))
      ->capture_default_str();
  reproduce
      ->add_option("--fail-on", f->fail_on,
                   "Exit with code 1 when the re-run is slower (or inconclusive, or not "
                   "comparable): slower[,inconclusive][,incomparable]")
      ->delimiter(',')
      ->check(CLI::IsMember({"slower", "inconclusive", "incomparable"}));

  CLI::App* export_command =
      app->add_subcommand("export", "Stored results as JSONL rows, CSV or FlashInfer-Bench traces");
  AddFilterFlags(export_command, f);
  export_command->add_option("--format", f->format, "jsonl | csv | trace")
      ->check(CLI::IsMember({"jsonl", "csv", "trace"}))
      ->capture_default_str();
  export_command->add_option("--limit", f->export_limit, "Rows at most (max 100000)")
      ->capture_default_str();
  export_command->add_option("--out", f->out, "Write to this file (default: stdout)");
}

bool IsResultsCommand(const std::string& command) {
  return command == "history" || command == "leaderboard" || command == "compare" ||
         command == "reproduce" || command == "export";
}

absl::Status ValidateResultsFlags(const std::string& command, const ResultsFlags& f) {
  if (command != "compare") return absl::OkStatus();
  if (f.runs.size() == 1) {
    return absl::InvalidArgumentError("compare: give two run ids, BASELINE CANDIDATE");
  }
  if (f.runs.size() == 2 && !f.implementation.empty()) {
    return absl::InvalidArgumentError("compare: --impl is for windows, not with two run ids");
  }
  if (f.runs.empty() && (f.implementation.empty() || f.suite.empty())) {
    return absl::InvalidArgumentError(
        "compare: give two run ids, or --impl and --suite with the two windows");
  }
  return absl::OkStatus();
}

int RunResultsCommand(const CliConfig& config, const ResultsFlags& flags, std::ostream& out,
                      std::ostream& err) {
  const ClientOptions options = ToClientOptions(config.global);
  std::shared_ptr<grpc::Channel> channel;
  if (grpc::Status s = MakeChannel(options, &channel); !s.ok()) {
    err << "error: " << s.error_message() << "\n";
    return kExitUsage;
  }
  const ResultsClient client(channel, options);
  if (config.command == "history") return History(client, config, flags, out, err);
  if (config.command == "leaderboard") return Leaderboard(client, config, flags, out, err);
  if (config.command == "compare") return Compare(client, config, flags, out, err);
  if (config.command == "reproduce") return Reproduce(client, config, flags, out, err);
  return Export(client, flags, out, err);
}

}  // namespace kerneleval::client::cli
