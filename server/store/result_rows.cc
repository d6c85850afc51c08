#include "server/store/result_rows.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/csv_cell.h"
#include "common/enum_names.h"
#include "common/preferred_sol.h"
#include "common/protocol.h"

namespace kerneleval::server::store {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::Status FromJson(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // rows written by a newer server
  const auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) return absl::DataLossError(absl::StrCat("stored JSON: ", status.ToString()));
  return absl::OkStatus();
}

std::string SamplesToJson(const std::vector<double>& samples) {
  return nlohmann::json(samples).dump();
}

std::vector<double> SamplesFromJson(const std::string& json) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_array()) return {};
  std::vector<double> out;
  for (const auto& v : parsed) {
    if (v.is_number()) out.push_back(v.get<double>());
  }
  return out;
}

std::vector<double> ComparableSamples(const v1::StoredResult& r) {
  const auto& raw = r.result().samples_seconds();
  if (!raw.empty()) return {raw.begin(), raw.end()};
  return {r.quantiles_seconds().begin(), r.quantiles_seconds().end()};
}

double PrimarySolRatio(const v1::WorkloadResult& r) {
  const v1::SolFigure* sol = PreferredSol(r.sol());
  return sol == nullptr ? 0 : sol->sol_ratio();
}

namespace {

nlohmann::ordered_json FlatRow(const v1::StoredResult& s) {
  const v1::WorkloadResult& r = s.result();
  const v1::SolFigure* sol = PreferredSol(r.sol());  // the figure sol_ratio is
  // Ordered: the CSV's columns follow this order.
  nlohmann::ordered_json row = {
      {"result_id", s.id()},
      {"run_id", s.run_id()},
      {"created_unix_seconds", s.created_unix_seconds()},
      {"suite", s.suite()},
      {"suite_hash", s.suite_hash()},
      {"server", s.server()},
      {"workload", r.workload()},
      {"implementation", r.implementation()},
      {"submission_hash", s.receipt().submission_hash()},
      {"device", r.device()},
      {"device_model", s.environment().device().model()},
      {"status", ResultStatusShortName(r.status())},
      {"median_seconds", r.latency().median_seconds()},
      {"mean_seconds", r.latency().mean_seconds()},
      {"min_seconds", r.latency().min_seconds()},
      {"stddev_seconds", r.latency().stddev_seconds()},
      {"samples", r.latency().samples()},
      {"bytes_moved", r.bytes_moved()},
      {"bytes_per_second", r.bytes_per_second()},
      {"sol_ratio", PrimarySolRatio(r)},
      {"sol_peak_source", sol == nullptr ? "" : PeakSourceShortName(sol->source())},
      {"sol_peak_bytes_per_second", sol == nullptr ? 0 : sol->peak_bytes_per_second()},
      {"sol_above_peak_reason",
       sol != nullptr && sol->above_peak() ? sol->above_peak_reason() : ""},
      {"measured_as", r.measured_as()},
      {"seed", s.receipt().seed()},
      // What it was measured with, as leaderboards and metrics label it: results of two
      // protocols are not comparable.
      {"protocol", ProtocolLabel(s.receipt().protocol())},
  };
  for (const auto& [axis, value] : r.axes()) row["axis_" + axis] = value;
  return row;
}

std::string CsvCellOf(const nlohmann::ordered_json& v) {
  return CsvCell(v.is_string() ? v.get<std::string>() : v.dump());
}

// The trace record of flashinfer-bench (definition, workload, solution, evaluation), one
// per result.
nlohmann::json Trace(const v1::StoredResult& s) {
  const v1::WorkloadResult& r = s.result();
  nlohmann::json axes = nlohmann::json::object();
  for (const auto& [axis, value] : r.axes()) axes[axis] = value;
  const bool passed = r.status() == v1::RESULT_STATUS_PASSED;
  return {
      {"definition", s.suite()},
      {"workload",
       {{"uuid", s.id()}, {"name", r.workload()}, {"axes", axes}, {"seed", s.receipt().seed()}}},
      {"solution", r.implementation()},
      {"evaluation",
       {{"status", passed ? "PASSED" : v1::ResultStatus_Name(r.status())},
        {"environment",
         {{"hardware", s.environment().device().model()},
          {"device_uuid", s.environment().device().uuid()},
          {"driver", s.environment().driver_version()},
          {"cuda", s.environment().cuda_runtime_version()},
          {"libs", {{"kerneleval", s.environment().server_version()}}}}},
        {"timestamp", s.environment().timestamp()},
        {"correctness",
         {{"max_absolute_error", r.correctness().max_abs_error()},
          {"max_relative_error", r.correctness().max_rel_error()}}},
        {"performance",
         {{"latency_ms", r.latency().median_seconds() * 1e3},
          {"speedup_factor", r.vs_best() > 0 ? 1 / r.vs_best() : 0},
          {"sol_ratio", PrimarySolRatio(r)}}}}},
  };
}

}  // namespace

std::string ExportRows(const std::vector<v1::StoredResult>& results, v1::ExportFormat format) {
  std::string out;
  if (format == v1::EXPORT_FORMAT_TRACE_JSONL) {
    for (const auto& s : results) absl::StrAppend(&out, Trace(s).dump(), "\n");
    return out;
  }
  std::vector<nlohmann::ordered_json> rows;
  for (const auto& s : results) rows.push_back(FlatRow(s));
  if (format != v1::EXPORT_FORMAT_CSV) {
    for (const auto& row : rows) absl::StrAppend(&out, row.dump(), "\n");
    return out;
  }
  // The union of the columns, in first-seen order (axes differ between suites).
  std::vector<std::string> columns;
  for (const auto& row : rows) {
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (std::find(columns.begin(), columns.end(), it.key()) == columns.end()) {
        columns.push_back(it.key());
      }
    }
  }
  absl::StrAppend(&out, absl::StrJoin(columns, ","), "\n");
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& c : columns) cells.push_back(row.contains(c) ? CsvCellOf(row[c]) : "");
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

}  // namespace kerneleval::server::store
