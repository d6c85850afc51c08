#include "client/report_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report_internal.h"
#include "client/tensors.h"
#include "client/text_table.h"
#include "common/conversions.h"

namespace kerneleval::client {

namespace report_internal {

std::vector<WorkloadGroup> GroupByWorkload(const v1::BenchmarkReport& report) {
  std::vector<WorkloadGroup> groups;
  std::map<std::string, size_t> index;
  for (const v1::WorkloadResult& result : report.results()) {
    auto [it, inserted] = index.emplace(result.workload(), groups.size());
    if (inserted) groups.push_back({result.workload(), {}});
    groups[it->second].results.push_back(&result);
  }
  for (WorkloadGroup& group : groups) {
    std::stable_sort(group.results.begin(), group.results.end(),
                     [](const v1::WorkloadResult* a, const v1::WorkloadResult* b) {
                       // Rank 0 (unranked) sorts after every ranked result.
                       const uint32_t ra = a->rank() == 0 ? UINT32_MAX : a->rank();
                       const uint32_t rb = b->rank() == 0 ? UINT32_MAX : b->rank();
                       return ra < rb;
                     });
  }
  return groups;
}

int64_t AxisValue(const v1::BenchmarkReport& report, const v1::WorkloadResult& result,
                  const std::string& axis) {
  const auto it = result.axes().find(axis);
  if (it != result.axes().end()) return it->second;
  for (const v1::Axis& a : report.definition().axes()) {
    if (a.name() == axis && a.is_const()) return a.value();
  }
  return -1;
}

std::string PlotAxis(const v1::BenchmarkReport& report) {
  std::map<std::string, std::set<int64_t>> values;
  for (const v1::WorkloadResult& result : report.results()) {
    for (const auto& [name, value] : result.axes()) values[name].insert(value);
  }
  std::string best;
  size_t best_count = 0;
  for (const auto& [name, distinct] : values) {
    const bool better =
        distinct.size() > best_count || (distinct.size() == best_count && name == "batch_size");
    if (better) {
      best = name;
      best_count = distinct.size();
    }
  }
  return best;
}

bool MultiDevice(const v1::BenchmarkReport& report) {
  std::set<std::string> devices;
  for (const v1::WorkloadResult& result : report.results()) devices.insert(result.device());
  return devices.size() > 1;
}

std::string CacheText(const v1::Protocol& protocol) {
  std::string text = CacheShortName(protocol.cache());
  if (protocol.cuda_graph()) {
    absl::StrAppend(&text, ", graph x", protocol.graph_calls() ? protocol.graph_calls() : 20);
  }
  if (protocol.rotate_inputs()) absl::StrAppend(&text, ", rotate");
  return text;
}

std::string ProtocolText(const v1::Protocol& protocol) {
  std::vector<std::string> parts;
  parts.push_back(absl::StrCat(CacheShortName(protocol.cache()), " cache"));
  if (protocol.cuda_graph()) {
    parts.push_back(absl::StrCat("CUDA graph of ",
                                 protocol.graph_calls() ? protocol.graph_calls() : 20, " calls"));
  }
  if (protocol.rotate_inputs()) parts.push_back("rotating inputs");
  parts.push_back(absl::StrCat("warm-up ", protocol.warmup()));
  if (protocol.has_adaptive()) {
    const v1::AdaptiveStop& a = protocol.adaptive();
    parts.push_back(absl::StrCat("adaptive ", a.min_samples(), "..", a.max_samples(),
                                 " samples to ", Fixed(100 * a.target_relative_spread(), 2),
                                 "% spread, cap ", Number(a.max_seconds()), " s"));
  } else {
    parts.push_back(absl::StrCat(protocol.repetitions(), " repetitions"));
  }
  parts.push_back(absl::StrCat("timer ", TimerName(protocol.timer())));
  parts.push_back(absl::StrCat("seed ", protocol.seed()));
  if (protocol.measure_copy_bandwidth()) parts.push_back("copy bandwidth measured");
  return absl::StrJoin(parts, ", ");
}

std::string CorrectnessText(const v1::WorkloadResult& result) {
  switch (result.status()) {
    case v1::RESULT_STATUS_RUNTIME_ERROR:
      return "ERROR";
    case v1::RESULT_STATUS_SKIPPED:
      return "SKIPPED";
    case v1::RESULT_STATUS_REJECTED:
      return "REJECTED";
    default:
      break;
  }
  const v1::Correctness& c = result.correctness();
  if (!c.checked()) return "unchecked";
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%s %.1e", c.passed() ? "PASS" : "FAIL", c.max_abs_error());
  std::string text = buffer;
  if (c.has_nan()) text += " NaN";
  if (c.has_inf()) text += " Inf";
  return text;
}

double SolPercent(const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures) {
  const v1::SolFigure* sol = PreferredSol(figures);
  return sol == nullptr ? -1 : 100 * sol->sol_ratio();
}

std::string VsBestText(double vs_best) { return vs_best > 0 ? Fixed(vs_best, 2) + "x" : "-"; }

std::string RankText(uint32_t rank) { return rank == 0 ? "-" : std::to_string(rank); }

std::string FormatBandwidth(double bytes_per_second) {
  if (!(bytes_per_second > 0)) return "-";
  if (bytes_per_second >= 1e12) return Fixed(bytes_per_second / 1e12, 2) + " TB/s";
  return Fixed(bytes_per_second / 1e9, 1) + " GB/s";
}

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string MeasuredAsText(const v1::BenchmarkReport& report, const v1::WorkloadResult& result) {
  if (!result.measured_as().empty()) return result.measured_as();
  return absl::StrCat(TimerName(result.timer()), ", ", CacheText(report.protocol()));
}

std::string DramText(const v1::DramTraffic& d) {
  if (!d.available()) return d.unavailable_reason();
  std::string text =
      absl::StrCat("DRAM read ", Fixed(d.read_bytes() / 1e6, 2), " MB (declared ",
                   Fixed(static_cast<double>(d.declared_read_bytes()) / 1e6, 2), "), write ",
                   Fixed(d.write_bytes() / 1e6, 2), " MB (declared ",
                   Fixed(static_cast<double>(d.declared_write_bytes()) / 1e6, 2), ")");
  if (d.bytes_per_second() > 0) absl::StrAppend(&text, ", ", FormatBandwidth(d.bytes_per_second()));
  absl::StrAppend(&text, ", median of ", d.windows(), d.cold() ? " cold" : " hot", " windows");
  return text;
}

std::string ClockSummaryText(const v1::ClockSummary& c) {
  if (c.samples() == 0) return "-";
  std::string text = absl::StrCat("SM ", Fixed(c.sm_mhz_mean(), 0), " MHz (", c.sm_mhz_min(), "-",
                                  c.sm_mhz_max(), "), memory ", c.memory_mhz_max(), " MHz");
  if (c.temperature_c_max() > 0) absl::StrAppend(&text, ", ", c.temperature_c_max(), " C");
  if (c.power_watts_max() > 0) absl::StrAppend(&text, ", ", Fixed(c.power_watts_max(), 0), " W");
  if (c.throttle_reason_names_size() > 0) {
    absl::StrAppend(&text, ", reasons: ", absl::StrJoin(c.throttle_reason_names(), "|"));
  }
  absl::StrAppend(&text, "; ", c.samples(), " readings");
  return text;
}

}  // namespace report_internal

using namespace report_internal;  // NOLINT: the formatters below are built from these.

namespace {

// Keeps list tables one line per entry; JSON output has the full text.
std::string Abbreviate(const std::string& text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max - 3) + "...";
}

std::string Percent(double percent) { return percent < 0 ? "-" : Fixed(percent, 1); }

std::string PeakNote(const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures) {
  const v1::SolFigure* sol = PreferredSol(figures);
  if (sol == nullptr) return "";
  return absl::StrCat(FormatBandwidth(sol->peak_bytes_per_second()), " (",
                      PeakSourceShortName(sol->source()), ")");
}

std::string ClocksText(const v1::Clocks& c) {
  std::string text = absl::StrCat("SM ", c.sm_mhz(), " MHz, memory ", c.memory_mhz(), " MHz");
  if (c.temperature_c() > 0) absl::StrAppend(&text, ", ", c.temperature_c(), " C");
  if (c.power_watts() > 0) absl::StrAppend(&text, ", ", Fixed(c.power_watts(), 0), " W");
  if (c.throttle_reason_names_size() > 0) {
    absl::StrAppend(&text, ", reasons: ", absl::StrJoin(c.throttle_reason_names(), "|"));
  }
  return text;
}

std::string EnvironmentText(const v1::Environment& env) {
  const v1::Device& d = env.device();
  TextTable table({}, /*align_numbers=*/false);
  table.AddRow({"device", absl::StrCat(d.name(), ": ", d.model().empty() ? d.kind() : d.model(),
                                       d.compute_capability().empty()
                                           ? ""
                                           : absl::StrCat(" (cc ", d.compute_capability(), ")"))});
  if (!d.uuid().empty()) table.AddRow({"uuid", d.uuid()});
  table.AddRow(
      {"peak",
       absl::StrCat(FormatBandwidth(d.peak_bytes_per_second()), " device attributes, ",
                    FormatBandwidth(d.datasheet_bytes_per_second()), " datasheet, ",
                    FormatBandwidth(d.measured_copy_bytes_per_second()), " measured copy")});
  table.AddRow({"driver", env.driver_version().empty() ? "-" : env.driver_version()});
  table.AddRow({"cuda", env.cuda_runtime_version().empty() ? "-" : env.cuda_runtime_version()});
  if (env.clocks_available()) {
    table.AddRow({"clocks before", ClocksText(env.clocks_before())});
    table.AddRow({"clocks after", ClocksText(env.clocks_after())});
    table.AddRow({"clocks during", ClockSummaryText(env.clocks_during())});
    table.AddRow({"throttled", env.throttled() ? "YES" : "no"});
  } else {
    table.AddRow({"clocks", "not available"});
  }
  table.AddRow({"server", absl::StrCat(env.server_version(), " (git ", env.git_revision(), ")",
                                       env.hostname().empty() ? "" : " on " + env.hostname())});
  table.AddRow({"timestamp", env.timestamp()});
  table.AddRow({"cupti", env.cupti_status().empty() ? "-" : env.cupti_status()});
  return table.Render("  ");
}

std::string WorkloadHeading(const v1::BenchmarkReport& report, const WorkloadGroup& group) {
  const v1::WorkloadResult& first = *group.results.front();
  std::vector<std::string> axes;
  for (const v1::Axis& axis : report.definition().axes()) {
    axes.push_back(absl::StrCat(axis.name(), "=", AxisValue(report, first, axis.name())));
  }
  if (axes.empty()) {
    for (const auto& [name, value] : first.axes()) axes.push_back(absl::StrCat(name, "=", value));
  }
  std::string heading = absl::StrCat("Workload ", group.name);
  if (!axes.empty()) absl::StrAppend(&heading, " (", absl::StrJoin(axes, ", "));
  if (report.has_definition()) {
    absl::StrAppend(&heading, axes.empty() ? " (" : ", ",
                    DTypeShortName(report.definition().dtype()), ", ",
                    ModeShortName(report.definition().mode()));
  }
  if (!axes.empty() || report.has_definition()) heading += ")";
  if (first.bytes_moved() > 0) {
    absl::StrAppend(&heading, ", ", FormatBytes(static_cast<double>(first.bytes_moved())),
                    " moved");
  }
  return heading;
}

}  // namespace

std::optional<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "json") return ReportFormat::kJson;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "html") return ReportFormat::kHtml;
  return std::nullopt;
}

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  return json;
}

const v1::SolFigure* PreferredSol(
    const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures) {
  for (const v1::SolFigure& figure : figures) {
    if (figure.source() == v1::PEAK_SOURCE_DEVICE_ATTRIBUTES) return &figure;
  }
  return figures.empty() ? nullptr : &figures[0];
}

std::string TimerName(v1::Timer timer) {
  switch (timer) {
    case v1::TIMER_CUPTI:
      return "cupti";
    case v1::TIMER_CUDA_EVENTS:
      return "events";
    case v1::TIMER_HOST_CLOCK:
      return "host";
    default:
      return "auto";
  }
}

std::string ResultStatusName(v1::ResultStatus status) {
  switch (status) {
    case v1::RESULT_STATUS_PASSED:
      return "passed";
    case v1::RESULT_STATUS_INCORRECT:
      return "incorrect";
    case v1::RESULT_STATUS_RUNTIME_ERROR:
      return "runtime_error";
    case v1::RESULT_STATUS_SKIPPED:
      return "skipped";
    case v1::RESULT_STATUS_REJECTED:
      return "rejected";
    default:
      return "unspecified";
  }
}

std::string FormatReportTable(const v1::BenchmarkReport& report) {
  const bool multi_device = MultiDevice(report);
  std::string out = absl::StrCat("Suite ", report.suite().empty() ? "(custom)" : report.suite());
  if (!report.definition().description().empty()) {
    absl::StrAppend(&out, ": ", report.definition().description());
  }
  absl::StrAppend(&out, "\nProtocol: ", ProtocolText(report.protocol()), "\n");
  if (!report.complete()) out += "INCOMPLETE: the run was cut short; missing results are absent\n";

  std::vector<std::string> errors;
  for (const WorkloadGroup& group : GroupByWorkload(report)) {
    std::vector<std::string> header = {"#", "implementation"};
    if (multi_device) header.push_back("device");
    for (const char* column : {"median", "mean", "min", "p99", "GB/s", "SOL %", "vs #1",
                               "correctness", "measured as", "SM MHz"}) {
      header.push_back(column);
    }
    TextTable table(header);
    std::vector<std::string> notes;
    std::string peak;
    for (const v1::WorkloadResult* r : group.results) {
      const v1::LatencyStats& l = r->latency();
      std::vector<std::string> row = {RankText(r->rank()), r->implementation()};
      if (multi_device) row.push_back(r->device());
      for (double seconds :
           {l.median_seconds(), l.mean_seconds(), l.min_seconds(), l.p99_seconds()}) {
        row.push_back(FormatSeconds(seconds));
      }
      row.push_back(r->bytes_per_second() > 0 ? Fixed(r->bytes_per_second() / 1e9, 1) : "-");
      row.push_back(Percent(SolPercent(r->sol())));
      row.push_back(VsBestText(r->vs_best()));
      row.push_back(CorrectnessText(*r));
      const std::string measured_as = MeasuredAsText(report, *r);
      row.push_back(measured_as);
      row.push_back(r->clocks().samples() > 0 ? Fixed(r->clocks().sm_mhz_mean(), 0) : "-");
      table.AddRow(std::move(row));
      const std::string who = absl::StrCat(r->implementation(), " (", measured_as, "): ");
      if (const std::string dram = DramText(r->dram()); !dram.empty()) {
        notes.push_back(absl::StrCat(who, dram));
      }
      for (const std::string& flag : r->integrity_flags()) {
        notes.push_back(absl::StrCat(who, "FLAG ", flag));
      }
      if (peak.empty()) peak = PeakNote(r->sol());
      if (!r->error().empty()) {
        errors.push_back(absl::StrCat(group.name, " / ", r->implementation(), ": ", r->error()));
      }
      if (!r->correctness().detail().empty() && !r->correctness().passed()) {
        errors.push_back(
            absl::StrCat(group.name, " / ", r->implementation(), ": ", r->correctness().detail()));
      }
    }
    absl::StrAppend(&out, "\n", WorkloadHeading(report, group), "\n", table.Render("  "));
    for (const std::string& note : notes) absl::StrAppend(&out, "  ", note, "\n");
    if (!peak.empty()) absl::StrAppend(&out, "  SOL % against ", peak, "\n");
  }
  if (!errors.empty()) {
    out += "\nProblems\n";
    for (const std::string& e : errors) absl::StrAppend(&out, "  ", e, "\n");
  }

  if (report.summaries_size() > 0) {
    std::vector<std::string> header = {"#", "implementation"};
    if (multi_device) header.push_back("device");
    for (const char* column : {"mean latency", "geomean SOL %", "vs #1", "passed", "failed"}) {
      header.push_back(column);
    }
    TextTable table(header);
    std::vector<const v1::ImplementationSummary*> summaries;
    for (const auto& s : report.summaries()) summaries.push_back(&s);
    std::stable_sort(summaries.begin(), summaries.end(), [](const auto* a, const auto* b) {
      return (a->rank() == 0 ? UINT32_MAX : a->rank()) < (b->rank() == 0 ? UINT32_MAX : b->rank());
    });
    for (const v1::ImplementationSummary* s : summaries) {
      std::vector<std::string> row = {RankText(s->rank()), s->implementation()};
      if (multi_device) row.push_back(s->device());
      row.push_back(FormatSeconds(s->mean_latency_seconds()));
      row.push_back(s->geomean_sol_ratio() > 0 ? Fixed(100 * s->geomean_sol_ratio(), 1) : "-");
      row.push_back(VsBestText(s->vs_best()));
      row.push_back(std::to_string(s->passed()));
      row.push_back(std::to_string(s->failed()));
      table.AddRow(std::move(row));
    }
    absl::StrAppend(&out, "\nImplementations (mean of per-workload medians over ",
                    GroupByWorkload(report).size(), " workloads)\n", table.Render("  "));
  }

  for (const v1::Environment& env : report.environments()) {
    absl::StrAppend(&out, "\nEnvironment ", env.device().name(), "\n", EnvironmentText(env));
  }
  absl::StrAppend(&out, "\nWall time ", Fixed(report.wall_seconds(), 2), " s\n");
  return out;
}

namespace {

// RFC 4180: quote a field holding a comma, quote or line break; double embedded quotes.
std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Micros(double seconds) { return Number(seconds * 1e6); }

}  // namespace

std::string FormatReportCsv(const v1::BenchmarkReport& report) {
  static const char* const kColumns[] = {"suite",
                                         "workload",
                                         "batch_size",
                                         "hidden_size",
                                         "dtype",
                                         "mode",
                                         "implementation",
                                         "device",
                                         "status",
                                         "rank",
                                         "timer",
                                         "cache",
                                         "cuda_graph",
                                         "graph_calls",
                                         "samples",
                                         "median_us",
                                         "mean_us",
                                         "min_us",
                                         "max_us",
                                         "stddev_us",
                                         "p90_us",
                                         "p99_us",
                                         "relative_spread",
                                         "bytes_moved",
                                         "gb_per_s",
                                         "sol_percent",
                                         "sol_peak_source",
                                         "sol_peak_gb_per_s",
                                         "vs_best",
                                         "correctness_checked",
                                         "correct",
                                         "max_abs_error",
                                         "max_rel_error",
                                         "matched_ratio",
                                         "error",
                                         "measured_as",
                                         "sm_mhz_mean",
                                         "sm_mhz_min",
                                         "sm_mhz_max",
                                         "memory_mhz",
                                         "throttled",
                                         "throttle_reasons",
                                         "admission_settled",
                                         "admission_settle_s",
                                         "admission_sm_mhz_before",
                                         "dram_read_bytes",
                                         "dram_write_bytes",
                                         "declared_read_bytes",
                                         "declared_write_bytes",
                                         "dram_gb_per_s",
                                         "dram_note",
                                         "integrity_flags"};
  std::vector<std::string> header(std::begin(kColumns), std::end(kColumns));
  std::string out = absl::StrJoin(header, ",") + "\n";
  const v1::Protocol& protocol = report.protocol();
  for (const WorkloadGroup& group : GroupByWorkload(report)) {
    for (const v1::WorkloadResult* r : group.results) {
      const v1::LatencyStats& l = r->latency();
      const v1::SolFigure* sol = PreferredSol(r->sol());
      const v1::Correctness& c = r->correctness();
      std::vector<std::string> row = {
          report.suite(),
          r->workload(),
          std::to_string(AxisValue(report, *r, "batch_size")),
          std::to_string(AxisValue(report, *r, "hidden_size")),
          DTypeShortName(report.definition().dtype()),
          ModeShortName(report.definition().mode()),
          r->implementation(),
          r->device(),
          ResultStatusName(r->status()),
          std::to_string(r->rank()),
          TimerName(r->timer()),
          CacheShortName(protocol.cache()),
          protocol.cuda_graph() ? "true" : "false",
          std::to_string(protocol.cuda_graph() ? protocol.graph_calls() : 0),
          std::to_string(l.samples()),
          Micros(l.median_seconds()),
          Micros(l.mean_seconds()),
          Micros(l.min_seconds()),
          Micros(l.max_seconds()),
          Micros(l.stddev_seconds()),
          Micros(l.p90_seconds()),
          Micros(l.p99_seconds()),
          Number(l.relative_spread()),
          std::to_string(r->bytes_moved()),
          Number(r->bytes_per_second() / 1e9),
          sol ? Number(100 * sol->sol_ratio()) : "",
          sol ? PeakSourceShortName(sol->source()) : "",
          sol ? Number(sol->peak_bytes_per_second() / 1e9) : "",
          Number(r->vs_best()),
          c.checked() ? "true" : "false",
          c.checked() ? (c.passed() ? "true" : "false") : "",
          Number(c.max_abs_error()),
          Number(c.max_rel_error()),
          Number(c.matched_ratio()),
          r->error(),
          MeasuredAsText(report, *r),
          Number(r->clocks().sm_mhz_mean()),
          std::to_string(r->clocks().sm_mhz_min()),
          std::to_string(r->clocks().sm_mhz_max()),
          std::to_string(r->clocks().memory_mhz_max()),
          r->throttled() ? "true" : "false",
          absl::StrJoin(r->clocks().throttle_reason_names(), "|"),
          r->admission().checked() ? (r->admission().settled() ? "true" : "false") : "",
          Number(r->admission().settle_seconds()),
          std::to_string(r->admission().sm_mhz_before()),
          r->dram().available() ? Number(r->dram().read_bytes()) : "",
          r->dram().available() ? Number(r->dram().write_bytes()) : "",
          std::to_string(r->dram().declared_read_bytes()),
          std::to_string(r->dram().declared_write_bytes()),
          r->dram().available() ? Number(r->dram().bytes_per_second() / 1e9) : "",
          r->dram().available() ? "" : r->dram().unavailable_reason(),
          absl::StrJoin(r->integrity_flags(), "; ")};
      for (std::string& field : row) field = CsvField(field);
      out += absl::StrJoin(row, ",") + "\n";
    }
  }
  return out;
}

absl::StatusOr<std::string> FormatReport(const v1::BenchmarkReport& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::kJson:
      return MessageToJson(report);
    case ReportFormat::kCsv:
      return FormatReportCsv(report);
    case ReportFormat::kHtml:
      return FormatReportHtml(report);
    case ReportFormat::kTable:
      break;
  }
  return FormatReportTable(report);
}

std::string FormatProgress(const v1::BenchmarkProgress& progress) {
  std::vector<std::string> parts;
  for (const v1::WorkloadResult& r : progress.results()) {
    std::string part =
        absl::StrCat(r.implementation(), " ", FormatSeconds(r.latency().median_seconds()));
    if (!r.measured_as().empty()) absl::StrAppend(&part, " [", r.measured_as(), "]");
    if (r.integrity_flags_size() > 0) absl::StrAppend(&part, " FLAGGED");
    if (r.status() != v1::RESULT_STATUS_PASSED && r.status() != v1::RESULT_STATUS_UNSPECIFIED) {
      absl::StrAppend(&part, " (", ResultStatusName(r.status()), ")");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrCat("[", progress.workload_index() + 1, "/", progress.workload_count(), "] ",
                      progress.workload(),
                      progress.device().empty() ? "" : " on " + progress.device(), ": ",
                      absl::StrJoin(parts, ", "));
}

namespace {

std::string TensorText(const v1::Tensor& t) {
  return absl::StrCat(DTypeShortName(t.dtype()), " [", absl::StrJoin(t.shape(), ", "), "]");
}

}  // namespace

std::string FormatRunResponse(const v1::RunResponse& response) {
  const v1::LatencyStats& l = response.latency();
  TextTable table({}, /*align_numbers=*/false);
  table.AddRow({"device", response.device()});
  table.AddRow({"implementation", response.implementation()});
  table.AddRow({"timer", TimerName(response.timer())});
  table.AddRow({"median", FormatSeconds(l.median_seconds())});
  table.AddRow(
      {"mean", absl::StrCat(FormatSeconds(l.mean_seconds()), " +- ",
                            l.stddev_seconds() > 0 ? FormatSeconds(l.stddev_seconds()) : "0",
                            " (spread ", Fixed(100 * l.relative_spread(), 2), "%)")});
  table.AddRow({"min / max", absl::StrCat(FormatSeconds(l.min_seconds()), " / ",
                                          FormatSeconds(l.max_seconds()))});
  table.AddRow({"p90 / p99", absl::StrCat(FormatSeconds(l.p90_seconds()), " / ",
                                          FormatSeconds(l.p99_seconds()))});
  table.AddRow({"samples", std::to_string(l.samples())});
  table.AddRow(
      {"bytes moved", absl::StrCat(response.bytes_moved(), " (",
                                   FormatBytes(static_cast<double>(response.bytes_moved())), ")")});
  table.AddRow({"bandwidth", FormatBandwidth(response.bytes_per_second())});
  for (const v1::SolFigure& sol : response.sol()) {
    table.AddRow({"SOL " + PeakSourceShortName(sol.source()),
                  absl::StrCat(Fixed(100 * sol.sol_ratio(), 1), " % of ",
                               FormatBandwidth(sol.peak_bytes_per_second()), " (floor ",
                               FormatSeconds(sol.sol_seconds()), ")")});
  }
  const v1::Correctness& c = response.correctness();
  if (c.checked()) {
    char buffer[160];
    std::snprintf(buffer, sizeof(buffer),
                  "%s max abs %.2e, max rel %.2e, matched %.4f%% (atol %g, rtol %g)%s%s",
                  c.passed() ? "PASS" : "FAIL", c.max_abs_error(), c.max_rel_error(),
                  100 * c.matched_ratio(), c.tolerance().atol(), c.tolerance().rtol(),
                  c.has_nan() ? " NaN" : "", c.has_inf() ? " Inf" : "");
    table.AddRow({"correctness", buffer});
    if (!c.detail().empty()) table.AddRow({"detail", c.detail()});
  } else {
    table.AddRow({"correctness", "unchecked"});
  }
  table.AddRow({"queue", FormatSeconds(response.queue_seconds())});
  if (response.has_output()) table.AddRow({"output", TensorText(response.output())});
  if (response.has_residual_out()) {
    table.AddRow({"residual_out", TensorText(response.residual_out())});
  }
  return table.Render();
}

std::string FormatDevices(const v1::ListDevicesResponse& response) {
  TextTable table({"device", "kind", "model", "SMs", "memory", "L2", "peak", "datasheet", "cc",
                   "healthy", "queue"});
  for (const v1::Device& d : response.devices()) {
    table.AddRow({d.name(), d.kind(), d.model(), d.sm_count() ? std::to_string(d.sm_count()) : "-",
                  d.memory_bytes() ? FormatBytes(static_cast<double>(d.memory_bytes())) : "-",
                  d.l2_cache_bytes() ? FormatBytes(static_cast<double>(d.l2_cache_bytes())) : "-",
                  FormatBandwidth(d.peak_bytes_per_second()),
                  FormatBandwidth(d.datasheet_bytes_per_second()),
                  d.compute_capability().empty() ? "-" : d.compute_capability(),
                  d.healthy() ? "yes" : "NO",
                  absl::StrCat(d.queue_depth(), "/", d.queue_capacity())});
  }
  return table.Render();
}

std::string FormatSuites(const v1::ListSuitesResponse& response) {
  TextTable table({"suite", "dtype", "mode", "axes", "workloads", "tags", "description"});
  for (const v1::SuiteDefinition& s : response.suites()) {
    std::vector<std::string> axes;
    for (const v1::Axis& a : s.axes()) {
      axes.push_back(a.is_const() ? absl::StrCat(a.name(), "=", a.value()) : a.name());
    }
    table.AddRow({s.name(), DTypeShortName(s.dtype()), ModeShortName(s.mode()),
                  absl::StrJoin(axes, " "), std::to_string(s.workloads_size()),
                  absl::StrJoin(s.tags(), ","), Abbreviate(s.description(), 72)});
  }
  return table.Render();
}

std::string FormatImplementations(const v1::ListImplementationsResponse& response) {
  TextTable table({"implementation", "device kind", "default", "description"});
  for (const v1::Implementation& i : response.implementations()) {
    table.AddRow({i.name(), i.device_kind(), i.is_default() ? "yes" : "", i.description()});
  }
  return table.Render();
}

}  // namespace kerneleval::client
