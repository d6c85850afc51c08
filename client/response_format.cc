// Text for the other responses: progress lines, a Run's result, the discovery lists.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report_format.h"
#include "client/report_internal.h"
#include "client/report_profile.h"
#include "client/text_table.h"
#include "common/conversions.h"

namespace kerneleval::client {

using namespace report_internal;  // NOLINT: FormatBandwidth, Number.

namespace {

// Keeps list tables one line per entry; JSON output has the full text.
std::string Abbreviate(const std::string& text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max - 3) + "...";
}

std::string TensorText(const v1::Tensor& t) {
  return absl::StrCat(DTypeShortName(t.dtype()), " [", absl::StrJoin(t.shape(), ", "), "]");
}

// The verdict's word, as bench rows print it; "unchecked" where nothing was checked or caught.
// A server that predates RunResponse.status only sent the correctness check: its verdict.
std::string RunStatusText(const v1::RunResponse& response) {
  v1::ResultStatus status = response.status();
  const v1::Correctness& c = response.correctness();
  if (status == v1::RESULT_STATUS_UNSPECIFIED && c.checked()) {
    status = c.passed() ? v1::RESULT_STATUS_PASSED : v1::RESULT_STATUS_INCORRECT;
  }
  return status == v1::RESULT_STATUS_UNSPECIFIED ? "unchecked" : ResultStatusShortName(status);
}

}  // namespace

std::string FormatStarted(const v1::BenchmarkStarted& started) {
  std::string text = absl::StrCat("benchmark ", started.suite(), ": ", started.workload_count(),
                                  started.workload_count() == 1 ? " workload" : " workloads");
  if (started.devices_size() > 0) {
    absl::StrAppend(&text, " on ", absl::StrJoin(started.devices(), ", "));
  }
  if (!started.run_id().empty()) absl::StrAppend(&text, ", run ", started.run_id());
  return text;
}

std::string FormatProgress(const v1::BenchmarkProgress& progress) {
  std::vector<std::string> parts;
  for (const v1::WorkloadResult& r : progress.results()) {
    std::string part =
        absl::StrCat(r.implementation(), " ", FormatSeconds(r.latency().median_seconds()));
    if (!r.measured_as().empty()) absl::StrAppend(&part, " [", r.measured_as(), "]");
    if (r.integrity_flags_size() > 0) absl::StrAppend(&part, " FLAGGED");
    if (r.status() != v1::RESULT_STATUS_PASSED && r.status() != v1::RESULT_STATUS_UNSPECIFIED) {
      absl::StrAppend(&part, " (", ResultStatusShortName(r.status()), ")");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrCat("[", progress.workload_index() + 1, "/", progress.workload_count(), "] ",
                      progress.workload(),
                      progress.device().empty() ? "" : " on " + progress.device(), ": ",
                      absl::StrJoin(parts, ", "));
}

std::string FormatRunResponse(const v1::RunResponse& response) {
  const v1::LatencyStats& l = response.latency();
  TextTable table({}, /*align_numbers=*/false);
  table.AddRow({"device", response.device()});
  table.AddRow({"implementation", response.implementation()});
  table.AddRow({"status", RunStatusText(response)});
  if (!response.error().empty()) table.AddRow({"error", response.error()});
  table.AddRow({"timer", TimerShortName(response.timer())});
  if (!response.measured_as().empty()) table.AddRow({"measured as", response.measured_as()});
  for (const std::string& flag : response.integrity_flags()) table.AddRow({"FLAGGED", flag});
  if (response.calls_checked() > 0) {
    table.AddRow({"calls checked", std::to_string(response.calls_checked())});
  }
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
    if (sol.above_peak()) table.AddRow({"  above 100 %", sol.above_peak_reason()});
  }
  const v1::Correctness& c = response.correctness();
  if (c.checked()) {
    char buffer[160];
    std::snprintf(
        buffer, sizeof(buffer),
        "%s max abs %.2e, max rel %.2e, matched %.4f%% (atol %g, rtol %g)%s%s",
        ResultStatusShortName(c.passed() ? v1::RESULT_STATUS_PASSED : v1::RESULT_STATUS_INCORRECT)
            .c_str(),
        c.max_abs_error(), c.max_rel_error(), 100 * c.matched_ratio(), c.tolerance().atol(),
        c.tolerance().rtol(), c.has_nan() ? " NaN" : "", c.has_inf() ? " Inf" : "");
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
  std::string text = table.Render();
  for (const std::string& line : report_internal::ProfileLines(response.profile())) {
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

std::string FormatDevices(const v1::ListDevicesResponse& response) {
  TextTable table({"device", "kind", "model", "SMs", "memory", "L2", "peak", "datasheet", "cc",
                   "healthy", "queue", "cold flush"});
  for (const v1::Device& d : response.devices()) {
    table.AddRow({d.name(), d.kind(), d.model(), d.sm_count() ? std::to_string(d.sm_count()) : "-",
                  d.memory_bytes() ? FormatBytes(static_cast<double>(d.memory_bytes())) : "-",
                  d.l2_cache_bytes() ? FormatBytes(static_cast<double>(d.l2_cache_bytes())) : "-",
                  FormatBandwidth(d.peak_bytes_per_second()),
                  FormatBandwidth(d.datasheet_bytes_per_second()),
                  d.compute_capability().empty() ? "-" : d.compute_capability(),
                  d.healthy() ? "yes" : "NO",
                  absl::StrCat(d.queue_depth(), "/", d.queue_capacity()),
                  d.cold_flush_bytes() == 0
                      ? "-"
                      : absl::StrCat(FormatBytes(static_cast<double>(d.cold_flush_bytes())),
                                     d.cold_flush_seconds() > 0
                                         ? ", " + FormatSeconds(d.cold_flush_seconds())
                                         : "")});
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
