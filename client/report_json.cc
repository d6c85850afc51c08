// The JSON form of any response (client/contract_json.h), pretty or one line.
#include "client/contract_json.h"
#include "client/report_format.h"

namespace kerneleval::client {

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message) {
  absl::StatusOr<nlohmann::ordered_json> json = ContractJson(message);
  if (!json.ok()) return json.status();
  return json->dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

absl::StatusOr<std::string> MessageToJsonLine(const google::protobuf::Message& message) {
  absl::StatusOr<nlohmann::ordered_json> json = ContractJson(message);
  if (!json.ok()) return json.status();
  return json->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

absl::StatusOr<std::string> FormatReportJsonl(const v1::BenchmarkReport& report,
                                              const std::string& target) {
  std::string lines;
  for (const v1::WorkloadResult& result : report.results()) {
    absl::StatusOr<nlohmann::ordered_json> fields = ContractJson(result);
    if (!fields.ok()) return fields.status();
    nlohmann::ordered_json line = nlohmann::ordered_json::object();
    if (!target.empty()) line["target"] = target;
    line["run_id"] = report.run_id();
    line["suite"] = report.suite();
    line.update(*fields);
    lines += line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    lines += '\n';
  }
  return lines;
}

}  // namespace kerneleval::client
