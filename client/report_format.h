// Rendering of service responses for people (tables, HTML) and for programs (JSON, CSV).
//
// Conventions shared by every format:
// - Latency columns show the median unless named otherwise; units are picked per value in
//   tables and fixed (microseconds) in CSV.
// - SOL % is taken against the device-attribute peak when the server reports one, else against
//   the first SOL figure; the figure's source is named beside it.
// - Workloads appear in the server's order; within a workload, ranked results by rank, then
//   unranked ones (failures) in the server's order.
// All functions are pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/statusor.h"
#include "common/preferred_sol.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

namespace v1 = ::kerneleval::v1;

enum class ReportFormat { kTable, kJson, kJsonl, kCsv, kHtml };

// "table" | "json" | "jsonl" | "csv" | "html".
std::optional<ReportFormat> ParseReportFormat(std::string_view name);

// The CLI's JSON of any message (client/contract_json.h): proto field names, every primitive
// field printed (zeros included) so that consumers see a stable set of keys, 64-bit integers
// as numbers and enums by the contract's short names. Pretty-printed, or on one line.
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message);
absl::StatusOr<std::string> MessageToJsonLine(const google::protobuf::Message& message);
// JSON Lines of a response, each line ending in a newline. A listing (a message of repeated
// message fields and scalars only: HistoryResponse, CompareResponse, LeaderboardResponse,
// ListDevicesResponse, ...) prints one line per element of its repeated message fields, in
// field order, and leaves its scalars (page tokens, counts) out: nothing for an empty one.
// Any other message prints whole on one line.
absl::StatusOr<std::string> MessageToJsonLines(const google::protobuf::Message& message);

// JSON Lines: one object per workload result, the result's own fields after "run_id" and
// "suite" (and "target" first when `target` is not empty, for a fan-out), each line ending
// in a newline; what `jq -c` and pandas.read_json(lines=True) take, and what a scheduled job
// appends to a log. Empty when the report has no results.
absl::StatusOr<std::string> FormatReportJsonl(const v1::BenchmarkReport& report,
                                              const std::string& target = "");

// The SOL figure a table shows (common/preferred_sol.h).
using ::kerneleval::PreferredSol;

// Leaderboard-style text: one table per workload, the implementation summary, the
// protocol, and one environment block per device.
std::string FormatReportTable(const v1::BenchmarkReport& report);
// Header row plus one row per workload x implementation (x device). Column names carry units.
std::string FormatReportCsv(const v1::BenchmarkReport& report);
// A self-contained page (inline CSS and SVG, no external assets): the tables above and a
// log-log plot of median latency against the suite's var axis, one <polyline> per
// implementation (per implementation x device when several devices ran).
std::string FormatReportHtml(const v1::BenchmarkReport& report);
// Dispatches on `format`; only kJson and kJsonl can fail.
absl::StatusOr<std::string> FormatReport(const v1::BenchmarkReport& report, ReportFormat format);

// One line for the started event, before any measurement:
// "benchmark fused_add_rmsnorm_h2048: 7 workloads on cuda:0, run 3f2a...".
std::string FormatStarted(const v1::BenchmarkStarted& started);

// One line for a progress event: "[3/7] batch_size=34 on cuda:0: fused 4.33 us, ...".
std::string FormatProgress(const v1::BenchmarkProgress& progress);

std::string FormatRunResponse(const v1::RunResponse& response);
std::string FormatDevices(const v1::ListDevicesResponse& response);
std::string FormatSuites(const v1::ListSuitesResponse& response);
std::string FormatImplementations(const v1::ListImplementationsResponse& response);

}  // namespace kerneleval::client
