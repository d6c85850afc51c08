// One name per enum value in every format. The oracle is the contract itself: a value's
// name is its enum name in kerneleval.proto without the prefix, in lower case, read from the
// descriptor, so a value added to the contract without a spelling in common/enum_names.cc
// fails here, as does a format that spells a value its own way.
#include "common/enum_names.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/report_format.h"
#include "client/results_command.h"
#include "common/protocol.h"
#include "kerneleval/v1/results.pb.h"
#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval {
namespace {

namespace v1 = ::kerneleval::v1;
using client::FormatReportCsv;
using client::FormatReportHtml;
using client::FormatReportTable;
using client::FormatRunResponse;

// The contract's name of value `number` of `type`: "DTYPE_BF16" -> "bf16".
std::string ContractName(const google::protobuf::EnumDescriptor* type, int number,
                         const std::string& prefix) {
  const std::string name = type->FindValueByNumber(number)->name();
  EXPECT_TRUE(absl::StartsWith(name, prefix)) << name;
  return absl::AsciiStrToLower(name.substr(prefix.size()));
}

// Every specified value of an enum: its number and its contract name.
std::vector<std::pair<int, std::string>> Values(const google::protobuf::EnumDescriptor* type,
                                                const std::string& prefix) {
  std::vector<std::pair<int, std::string>> values;
  for (int i = 0; i < type->value_count(); ++i) {
    const int number = type->value(i)->number();
    if (number != 0) values.emplace_back(number, ContractName(type, number, prefix));
  }
  EXPECT_GE(values.size(), 2u) << type->full_name();
  return values;
}

TEST(EnumNames, EveryValuePrintsItsContractNameAndParsesBack) {
  for (const auto& [n, name] : Values(v1::DType_descriptor(), "DTYPE_")) {
    EXPECT_EQ(DTypeShortName(static_cast<v1::DType>(n)), name);
    EXPECT_EQ(ParseDTypeName(name), static_cast<v1::DType>(n)) << name;
  }
  for (const auto& [n, name] : Values(v1::Mode_descriptor(), "MODE_")) {
    EXPECT_EQ(ModeShortName(static_cast<v1::Mode>(n)), name);
    EXPECT_EQ(ParseModeName(name), static_cast<v1::Mode>(n)) << name;
  }
  for (const auto& [n, name] : Values(v1::Timer_descriptor(), "TIMER_")) {
    EXPECT_EQ(TimerShortName(static_cast<v1::Timer>(n)), name);
    EXPECT_EQ(ParseTimerName(name), static_cast<v1::Timer>(n)) << name;
  }
  for (const auto& [n, name] : Values(v1::CacheMode_descriptor(), "CACHE_MODE_")) {
    EXPECT_EQ(CacheShortName(static_cast<v1::CacheMode>(n)), name);
    EXPECT_EQ(ParseCacheName(name), static_cast<v1::CacheMode>(n)) << name;
  }
  for (const auto& [n, name] : Values(v1::ResultStatus_descriptor(), "RESULT_STATUS_")) {
    EXPECT_EQ(ResultStatusShortName(static_cast<v1::ResultStatus>(n)), name);
    EXPECT_EQ(ParseResultStatusName(name), static_cast<v1::ResultStatus>(n)) << name;
  }
  for (const auto& [n, name] : Values(v1::PeakSource_descriptor(), "PEAK_SOURCE_")) {
    EXPECT_EQ(PeakSourceShortName(static_cast<v1::PeakSource>(n)), name);
    EXPECT_EQ(ParsePeakSourceName(name), static_cast<v1::PeakSource>(n)) << name;
  }
}

// EnumShortName, which formats walking a message by descriptor use, agrees with the tables
// and gives the enums without a table (Verdict, ExportFormat, SourceLanguage) the same rule.
TEST(EnumNames, ByDescriptorEveryEnumOfTheContract) {
  for (const auto* type :
       {v1::DType_descriptor(), v1::Mode_descriptor(), v1::Timer_descriptor(),
        v1::CacheMode_descriptor(), v1::ResultStatus_descriptor(), v1::PeakSource_descriptor()}) {
    for (int i = 0; i < type->value_count(); ++i) {
      const int n = type->value(i)->number();
      std::string table;
      if (type == v1::DType_descriptor()) table = DTypeShortName(static_cast<v1::DType>(n));
      if (type == v1::Mode_descriptor()) table = ModeShortName(static_cast<v1::Mode>(n));
      if (type == v1::Timer_descriptor()) table = TimerShortName(static_cast<v1::Timer>(n));
      if (type == v1::CacheMode_descriptor()) table = CacheShortName(static_cast<v1::CacheMode>(n));
      if (type == v1::ResultStatus_descriptor()) {
        table = ResultStatusShortName(static_cast<v1::ResultStatus>(n));
      }
      if (type == v1::PeakSource_descriptor()) {
        table = PeakSourceShortName(static_cast<v1::PeakSource>(n));
      }
      EXPECT_EQ(EnumShortName(*type, n), table) << type->value(i)->name();
    }
  }
  for (const auto& [n, name] : Values(v1::Verdict_descriptor(), "VERDICT_")) {
    EXPECT_EQ(EnumShortName(*v1::Verdict_descriptor(), n), name);
  }
  for (const auto& [n, name] : Values(v1::ExportFormat_descriptor(), "EXPORT_FORMAT_")) {
    EXPECT_EQ(EnumShortName(*v1::ExportFormat_descriptor(), n), name);
  }
  for (const auto& [n, name] : Values(v1::SourceLanguage_descriptor(), "SOURCE_LANGUAGE_")) {
    EXPECT_EQ(EnumShortName(*v1::SourceLanguage_descriptor(), n), name);
  }
  EXPECT_EQ(EnumShortName(*v1::Verdict_descriptor(), 0), "unspecified");
  EXPECT_EQ(EnumShortName(*v1::Verdict_descriptor(), 99), "unspecified");
  EXPECT_EQ(EnumShortName(*v1::Timer_descriptor(), 99), "auto");
}

TEST(EnumNames, UnspecifiedPrintsWhatTheContractSaysItMeans) {
  EXPECT_EQ(ModeShortName(v1::MODE_UNSPECIFIED), "output");
  EXPECT_EQ(CacheShortName(v1::CACHE_MODE_UNSPECIFIED), "cold");
  EXPECT_EQ(TimerShortName(v1::TIMER_UNSPECIFIED), "auto");
  EXPECT_EQ(DTypeShortName(v1::DTYPE_UNSPECIFIED), "unspecified");
  EXPECT_EQ(ResultStatusShortName(static_cast<v1::ResultStatus>(99)), "unspecified");
  // "output" is MODE_OUTPUT, never the unspecified value; "unspecified" is no choice.
  EXPECT_EQ(ParseModeName("output"), v1::MODE_OUTPUT);
  EXPECT_EQ(ParseCacheName("cold"), v1::CACHE_MODE_COLD);
  EXPECT_FALSE(ParseDTypeName("unspecified").has_value());
  EXPECT_FALSE(ParseResultStatusName("unspecified").has_value());
}

TEST(EnumNames, AliasesParseButNeverPrint) {
  EXPECT_EQ(ParseTimerName("events"), v1::TIMER_CUDA_EVENTS);
  EXPECT_EQ(ParseTimerName("host"), v1::TIMER_HOST_CLOCK);
  EXPECT_EQ(ParseTimerName("auto"), v1::TIMER_UNSPECIFIED);
  EXPECT_EQ(ParseDTypeName("bfloat16"), v1::DTYPE_BF16);
  EXPECT_EQ(ParseDTypeName("half"), v1::DTYPE_FP16);
  EXPECT_EQ(ParseDTypeName("float"), v1::DTYPE_FP32);
  EXPECT_FALSE(ParseTimerName("CUPTI").has_value());
  EXPECT_FALSE(ParseTimerName("").has_value());
  EXPECT_FALSE(ParseDTypeName("int8").has_value());
  EXPECT_EQ(TimerNames(), (std::vector<std::string>{"auto", "cupti", "cuda_events", "host_clock"}));
  EXPECT_EQ(TimerSpellings(), (std::vector<std::string>{"auto", "cupti", "cuda_events",
                                                        "host_clock", "events", "host"}));
  for (const std::string& s : DTypeSpellings()) EXPECT_TRUE(ParseDTypeName(s)) << s;
  for (const std::string& s : ModeSpellings()) EXPECT_TRUE(ParseModeName(s)) << s;
  for (const std::string& s : CacheNames()) EXPECT_TRUE(ParseCacheName(s)) << s;
}

TEST(EnumNames, MeasuredAsNamesTimerCacheAndProtocol) {
  EXPECT_EQ(MeasuredAsName(v1::TIMER_CUPTI, v1::CACHE_MODE_COLD, false, 1, false), "cupti, cold");
  EXPECT_EQ(MeasuredAsName(v1::TIMER_CUDA_EVENTS, v1::CACHE_MODE_HOT, true, 50, true),
            "cuda_events, hot, graph x50, rotate");
  EXPECT_EQ(MeasuredAsName(v1::TIMER_HOST_CLOCK, v1::CACHE_MODE_UNSPECIFIED, false, 1, false),
            "host_clock, cold");
}

// One line of `text` that holds `needle` (rows are keyed by a unique implementation name).
std::string LineWith(const std::string& text, const std::string& needle) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) return std::string(line);
  }
  ADD_FAILURE() << "no line with " << needle << " in\n" << text;
  return "";
}

// The cell of `column` in the CSV row of `implementation`; no cell before it may be quoted.
std::string CsvCell(const std::string& csv, const std::string& column,
                    const std::string& implementation) {
  std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  const std::string row = LineWith(csv, "," + implementation + ",");
  std::vector<std::string> cells = absl::StrSplit(row, ',');
  for (size_t i = 0; i < header.size() && i < cells.size(); ++i) {
    if (header[i] == column) return cells[i];
  }
  ADD_FAILURE() << "no column " << column;
  return "";
}

// The HTML row of `implementation` in a workload table: from its cell to the end of the row.
std::string HtmlRow(const std::string& html, const std::string& implementation) {
  const size_t at = html.find(">" + implementation + "</td>");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</tr>", at) - at);
}

// A report with one result per value: implementation "impl<n>" holds status / timer n.
v1::BenchmarkReport ReportOfEvery(bool statuses) {
  v1::BenchmarkReport report;
  report.set_suite("names");
  report.mutable_definition()->set_name("names");
  report.mutable_definition()->set_dtype(v1::DTYPE_FP16);
  report.mutable_definition()->set_mode(v1::MODE_IN_PLACE);
  report.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
  const auto* type = statuses ? v1::ResultStatus_descriptor() : v1::Timer_descriptor();
  for (int i = 0; i < type->value_count(); ++i) {
    const int n = type->value(i)->number();
    if (n == 0) continue;
    v1::WorkloadResult* r = report.add_results();
    r->set_workload("batch_size=1");
    (*r->mutable_axes())["batch_size"] = 1;
    r->set_implementation("impl" + std::to_string(n));
    r->set_device("cpu");
    r->mutable_latency()->set_median_seconds(1e-6);
    r->mutable_latency()->set_samples(3);
    r->set_timer(statuses ? v1::TIMER_HOST_CLOCK : static_cast<v1::Timer>(n));
    r->set_status(statuses ? static_cast<v1::ResultStatus>(n) : v1::RESULT_STATUS_PASSED);
    r->mutable_correctness()->set_checked(true);
    r->mutable_correctness()->set_passed(r->status() != v1::RESULT_STATUS_INCORRECT);
  }
  return report;
}

TEST(EveryFormat, PrintsEveryResultStatusByItsName) {
  const v1::BenchmarkReport report = ReportOfEvery(/*statuses=*/true);
  const std::string table = FormatReportTable(report);
  const std::string csv = FormatReportCsv(report);
  const std::string html = FormatReportHtml(report);
  const absl::StatusOr<std::string> json = client::MessageToJson(report);
  ASSERT_TRUE(json.ok());
  v1::HistoryResponse history;
  for (const v1::WorkloadResult& r : report.results()) {
    v1::StoredResult* s = history.add_results();
    s->set_id(r.implementation() + "-id");
    s->set_suite("names");
    *s->mutable_result() = r;
  }
  const std::string history_table = client::cli::FormatHistory(history);
  for (const auto& [n, name] : Values(v1::ResultStatus_descriptor(), "RESULT_STATUS_")) {
    const std::string impl = "impl" + std::to_string(n);
    SCOPED_TRACE(name);
    EXPECT_TRUE(absl::StrContains(LineWith(table, " " + impl + " "), name));
    EXPECT_EQ(CsvCell(csv, "status", impl), name);
    EXPECT_TRUE(absl::StrContains(HtmlRow(html, impl), ">" + name)) << HtmlRow(html, impl);
    EXPECT_TRUE(absl::StrContains(LineWith(history_table, impl + "-id"), " " + name + " "))
        << history_table;
    EXPECT_TRUE(absl::StrContains(*json, "\"status\": \"" + name + "\"")) << name;
  }
}

TEST(EveryFormat, PrintsEveryTimerAndTheProtocolByTheirNames) {
  const v1::BenchmarkReport report = ReportOfEvery(/*statuses=*/false);
  const std::string table = FormatReportTable(report);
  const std::string csv = FormatReportCsv(report);
  const std::string html = FormatReportHtml(report);
  for (const auto& [n, name] : Values(v1::Timer_descriptor(), "TIMER_")) {
    const std::string impl = "impl" + std::to_string(n);
    SCOPED_TRACE(name);
    EXPECT_EQ(CsvCell(csv, "timer", impl), name);
    EXPECT_EQ(CsvCell(csv, "cache", impl), "hot");
    EXPECT_EQ(CsvCell(csv, "dtype", impl), "fp16");
    EXPECT_EQ(CsvCell(csv, "mode", impl), "in_place");
    EXPECT_TRUE(absl::StrContains(LineWith(csv, "," + impl + ","), "\"" + name + ", hot\""));
    EXPECT_TRUE(absl::StrContains(LineWith(table, " " + impl + " "), name + ", hot"));
    EXPECT_TRUE(absl::StrContains(HtmlRow(html, impl), name + ", hot"));
    v1::RunResponse run;
    run.set_timer(static_cast<v1::Timer>(n));
    EXPECT_TRUE(absl::StrContains(LineWith(FormatRunResponse(run), "timer"), " " + name));
  }
  EXPECT_TRUE(absl::StrContains(table, "fp16")) << table;
  EXPECT_TRUE(absl::StrContains(table, "in_place")) << table;
}

}  // namespace
}  // namespace kerneleval
