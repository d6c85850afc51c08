// Format names, the short names every format shares, and the dispatch to one format.
#include "client/report_format.h"

namespace kerneleval::client {

std::optional<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "json") return ReportFormat::kJson;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "html") return ReportFormat::kHtml;
  return std::nullopt;
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

}  // namespace kerneleval::client
