// The CSV report (FormatReportCsv): one row per workload x implementation (x device).
#include <iterator>

#include "absl/strings/str_join.h"
#include "client/report_format.h"
#include "client/report_internal.h"
#include "common/conversions.h"

namespace kerneleval::client {

using namespace report_internal;  // NOLINT: the rows are built from these.

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
                                         "sol_above_peak_reason",
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
          ResultStatusShortName(r->status()),
          std::to_string(r->rank()),
          TimerShortName(r->timer()),
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
          sol && sol->above_peak() ? sol->above_peak_reason() : "",
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

}  // namespace kerneleval::client
