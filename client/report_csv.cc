// The CSV report (FormatReportCsv): one row per workload x implementation (x device).
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "client/report_format.h"
#include "client/report_internal.h"
#include "common/conversions.h"
#include "common/csv_cell.h"

namespace kerneleval::client {

using namespace report_internal;  // NOLINT: the rows are built from these.

namespace {

std::string Micros(double seconds) { return Number(seconds * 1e6); }

std::string Bool(bool value) { return value ? "true" : "false"; }

// The header row; CsvRow writes the fields in this order.
constexpr const char* kColumns[] = {"run_id",
                                    "suite",
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

// run_id .. rank: which run, workload, implementation and device the row is. The run id
// (empty where the server keeps no store) lets rows of several reports be concatenated and
// traced back with `kerneleval history --run`.
std::vector<std::string> RunColumns(const v1::BenchmarkReport& report,
                                    const v1::WorkloadResult& r) {
  return {report.run_id(),
          report.suite(),
          r.workload(),
          std::to_string(AxisValue(report, r, "batch_size")),
          std::to_string(AxisValue(report, r, "hidden_size")),
          DTypeShortName(report.definition().dtype()),
          ModeShortName(report.definition().mode()),
          r.implementation(),
          r.device(),
          ResultStatusShortName(r.status()),
          std::to_string(r.rank())};
}

// timer .. graph_calls: how the timings were taken.
std::vector<std::string> ProtocolColumns(const v1::Protocol& protocol,
                                         const v1::WorkloadResult& r) {
  return {TimerShortName(r.timer()), CacheShortName(protocol.cache()), Bool(protocol.cuda_graph()),
          std::to_string(protocol.cuda_graph() ? protocol.graph_calls() : 0)};
}

// samples .. relative_spread.
std::vector<std::string> LatencyColumns(const v1::LatencyStats& l) {
  return {std::to_string(l.samples()), Micros(l.median_seconds()), Micros(l.mean_seconds()),
          Micros(l.min_seconds()),     Micros(l.max_seconds()),    Micros(l.stddev_seconds()),
          Micros(l.p90_seconds()),     Micros(l.p99_seconds()),    Number(l.relative_spread())};
}

// bytes_moved .. vs_best: bandwidth and its speed-of-light figure, empty without one.
std::vector<std::string> BandwidthColumns(const v1::WorkloadResult& r) {
  const v1::SolFigure* sol = PreferredSol(r.sol());
  return {std::to_string(r.bytes_moved()),
          Number(r.bytes_per_second() / 1e9),
          sol ? Number(100 * sol->sol_ratio()) : "",
          sol ? PeakSourceShortName(sol->source()) : "",
          sol ? Number(sol->peak_bytes_per_second() / 1e9) : "",
          sol && sol->above_peak() ? sol->above_peak_reason() : "",
          Number(r.vs_best())};
}

// correctness_checked .. measured_as.
std::vector<std::string> OutcomeColumns(const v1::BenchmarkReport& report,
                                        const v1::WorkloadResult& r) {
  const v1::Correctness& c = r.correctness();
  return {Bool(c.checked()),         c.checked() ? Bool(c.passed()) : "", Number(c.max_abs_error()),
          Number(c.max_rel_error()), Number(c.matched_ratio()),           r.error(),
          MeasuredAsText(report, r)};
}

// sm_mhz_mean .. admission_sm_mhz_before: the clocks while measuring and before admission.
std::vector<std::string> ClockColumns(const v1::WorkloadResult& r) {
  const v1::ClockAdmission& admission = r.admission();
  return {Number(r.clocks().sm_mhz_mean()),
          std::to_string(r.clocks().sm_mhz_min()),
          std::to_string(r.clocks().sm_mhz_max()),
          std::to_string(r.clocks().memory_mhz_max()),
          Bool(r.throttled()),
          absl::StrJoin(r.clocks().throttle_reason_names(), "|"),
          admission.checked() ? Bool(admission.settled()) : "",
          Number(admission.settle_seconds()),
          std::to_string(admission.sm_mhz_before())};
}

// dram_read_bytes .. dram_note: the counters' figures, empty when they could not be read.
std::vector<std::string> DramColumns(const v1::DramTraffic& dram) {
  return {dram.available() ? Number(dram.read_bytes()) : "",
          dram.available() ? Number(dram.write_bytes()) : "",
          std::to_string(dram.declared_read_bytes()),
          std::to_string(dram.declared_write_bytes()),
          dram.available() ? Number(dram.bytes_per_second() / 1e9) : "",
          dram.available() ? "" : dram.unavailable_reason()};
}

// One line of the CSV, its fields quoted where needed, in kColumns' order.
std::string CsvRow(const v1::BenchmarkReport& report, const v1::WorkloadResult& r) {
  std::vector<std::string> row = RunColumns(report, r);
  for (const std::vector<std::string>& columns :
       {ProtocolColumns(report.protocol(), r), LatencyColumns(r.latency()), BandwidthColumns(r),
        OutcomeColumns(report, r), ClockColumns(r), DramColumns(r.dram())}) {
    row.insert(row.end(), columns.begin(), columns.end());
  }
  row.push_back(absl::StrJoin(r.integrity_flags(), "; "));
  for (std::string& field : row) field = CsvCell(field);
  return absl::StrJoin(row, ",") + "\n";
}

}  // namespace

std::string FormatReportCsv(const v1::BenchmarkReport& report) {
  std::string out = absl::StrJoin(std::begin(kColumns), std::end(kColumns), ",") + "\n";
  for (const WorkloadGroup& group : GroupByWorkload(report)) {
    for (const v1::WorkloadResult* r : group.results) out += CsvRow(report, *r);
  }
  return out;
}

}  // namespace kerneleval::client
