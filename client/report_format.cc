// Format names and the dispatch to one format.
#include "client/report_format.h"

namespace kerneleval::client {

std::optional<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "json") return ReportFormat::kJson;
  if (name == "jsonl") return ReportFormat::kJsonl;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "html") return ReportFormat::kHtml;
  return std::nullopt;
}

absl::StatusOr<std::string> FormatReport(const v1::BenchmarkReport& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::kJson: {
      absl::StatusOr<std::string> json = MessageToJson(report);
      if (!json.ok()) return json.status();
      return *json + "\n";
    }
    case ReportFormat::kJsonl:
      return FormatReportJsonl(report);
    case ReportFormat::kCsv:
      return FormatReportCsv(report);
    case ReportFormat::kHtml:
      return FormatReportHtml(report);
    case ReportFormat::kTable:
      break;
  }
  return FormatReportTable(report);
}

}  // namespace kerneleval::client
