// The leaderboard-style text report (FormatReportTable).
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report_format.h"
#include "client/report_internal.h"
#include "client/report_profile.h"
#include "client/text_table.h"
#include "common/conversions.h"
#include "common/protocol.h"

namespace kerneleval::client {

using namespace report_internal;  // NOLINT: the table is built from these.

namespace {

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
  table.AddRow({"host wait", HostWaitText(env)});
  if (const std::string flush = ColdFlushText(d); !flush.empty()) {
    table.AddRow({"cold flush", flush});
  }
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

// "Suite name: description", the protocol, and a warning when the run was cut short.
std::string ReportHeading(const v1::BenchmarkReport& report) {
  std::string out = absl::StrCat("Suite ", report.suite().empty() ? "(custom)" : report.suite());
  if (!report.definition().description().empty()) {
    absl::StrAppend(&out, ": ", report.definition().description());
  }
  absl::StrAppend(&out, "\nProtocol: ", ProtocolText(report.protocol()), "\n");
  // What "cold" costs where it ran: the read between calls, outside the timed window.
  if (report.protocol().cache() != v1::CACHE_MODE_HOT) {
    for (const v1::Environment& env : report.environments()) {
      if (const std::string flush = ColdFlushText(env.device()); !flush.empty()) {
        absl::StrAppend(&out, "Cold on ", env.device().name(), ": ", flush, "\n");
      }
    }
  }
  if (!report.complete()) out += "INCOMPLETE: the run was cut short; missing results are absent\n";
  return out;
}

// "#", "implementation", then "device" when there are several, then `columns`.
std::vector<std::string> RankedHeader(bool multi_device,
                                      std::initializer_list<const char*> columns) {
  std::vector<std::string> header = {"#", "implementation"};
  if (multi_device) header.push_back("device");
  for (const char* column : columns) header.push_back(column);
  return header;
}

std::vector<std::string> ResultRow(const v1::BenchmarkReport& report, const v1::WorkloadResult& r,
                                   bool multi_device) {
  const v1::LatencyStats& l = r.latency();
  std::vector<std::string> row = {RankText(r.rank()), r.implementation()};
  if (multi_device) row.push_back(r.device());
  for (double seconds : {l.median_seconds(), l.mean_seconds(), l.min_seconds(), l.p99_seconds()}) {
    row.push_back(FormatSeconds(seconds));
  }
  row.push_back(r.bytes_per_second() > 0 ? Fixed(r.bytes_per_second() / 1e9, 1) : "-");
  row.push_back(Percent(SolPercent(r.sol())));
  row.push_back(VsBestText(r.vs_best()));
  row.push_back(CorrectnessText(r));
  row.push_back(MeasuredAsText(report, r));
  row.push_back(r.clocks().samples() > 0 ? Fixed(r.clocks().sm_mhz_mean(), 0) : "-");
  return row;
}

// The lines printed under a workload's table for one result: DRAM traffic, kernel split,
// device-side checks, integrity flags, SOL above the peak.
std::vector<std::string> ResultNotes(const v1::BenchmarkReport& report,
                                     const v1::WorkloadResult& r) {
  std::vector<std::string> notes;
  const std::string who = absl::StrCat(r.implementation(), " (", MeasuredAsText(report, r), "): ");
  if (const std::string dram = DramText(r.dram()); !dram.empty()) {
    notes.push_back(absl::StrCat(who, dram));
  }
  if (const std::string kernels = KernelsText(r.kernels()); !kernels.empty()) {
    notes.push_back(absl::StrCat(who, kernels));
  }
  for (const std::string& line : ProfileLines(r.profile())) {
    notes.push_back(absl::StrCat(who, line));
  }
  if (r.calls_checked() > 0) {
    notes.push_back(absl::StrCat(who, r.calls_checked(),
                                 " calls checked on the device (output, inputs, guards)"));
  }
  for (const std::string& flag : r.integrity_flags()) {
    notes.push_back(absl::StrCat(who, "FLAG ", flag));
  }
  if (const v1::SolFigure* sol = PreferredSol(r.sol()); sol != nullptr && sol->above_peak()) {
    notes.push_back(absl::StrCat(who, "SOL above 100 %: ", sol->above_peak_reason()));
  }
  return notes;
}

// A result's error and failed-correctness detail, for the Problems section.
void AddProblems(const std::string& workload, const v1::WorkloadResult& r,
                 std::vector<std::string>* problems) {
  if (!r.error().empty()) {
    problems->push_back(absl::StrCat(workload, " / ", r.implementation(), ": ", r.error()));
  }
  if (!r.correctness().detail().empty() && !r.correctness().passed()) {
    problems->push_back(
        absl::StrCat(workload, " / ", r.implementation(), ": ", r.correctness().detail()));
  }
}

// A workload's heading, its table of results, their notes and the peak SOL % is taken
// against; the results' problems go to `problems`.
std::string WorkloadSection(const v1::BenchmarkReport& report, const WorkloadGroup& group,
                            bool multi_device, std::vector<std::string>* problems) {
  TextTable table(RankedHeader(multi_device, {"median", "mean", "min", "p99", "GB/s", "SOL %",
                                              "vs #1", "correctness", "measured as", "SM MHz"}));
  std::vector<std::string> notes;
  std::string peak;
  for (const v1::WorkloadResult* r : group.results) {
    table.AddRow(ResultRow(report, *r, multi_device));
    for (std::string& note : ResultNotes(report, *r)) notes.push_back(std::move(note));
    if (peak.empty()) peak = PeakNote(r->sol());
    AddProblems(group.name, *r, problems);
  }
  std::string out = absl::StrCat("\n", WorkloadHeading(report, group), "\n", table.Render("  "));
  for (const std::string& note : notes) absl::StrAppend(&out, "  ", note, "\n");
  if (!peak.empty()) absl::StrAppend(&out, "  SOL % against ", peak, "\n");
  return out;
}

// The per-implementation summary table, ranked first, unranked last.
std::string SummarySection(const v1::BenchmarkReport& report, bool multi_device) {
  TextTable table(
      RankedHeader(multi_device, {"mean latency", "geomean SOL %", "vs #1", "passed", "failed"}));
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
  return absl::StrCat("\nImplementations (mean of per-workload medians over ",
                      GroupByWorkload(report).size(), " workloads)\n", table.Render("  "));
}

}  // namespace

std::string FormatReportTable(const v1::BenchmarkReport& report) {
  const bool multi_device = MultiDevice(report);
  std::string out = ReportHeading(report);
  std::vector<std::string> problems;
  for (const WorkloadGroup& group : GroupByWorkload(report)) {
    out += WorkloadSection(report, group, multi_device, &problems);
  }
  if (!problems.empty()) {
    out += "\nProblems\n";
    for (const std::string& e : problems) absl::StrAppend(&out, "  ", e, "\n");
  }
  if (report.summaries_size() > 0) out += SummarySection(report, multi_device);
  for (const v1::Environment& env : report.environments()) {
    absl::StrAppend(&out, "\nEnvironment ", env.device().name(), "\n", EnvironmentText(env));
  }
  absl::StrAppend(&out, "\nWall time ", Fixed(report.wall_seconds(), 2), " s\n");
  return out;
}

}  // namespace kerneleval::client
