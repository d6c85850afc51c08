// The JSON form of any response (client/contract_json.h), pretty or one line.
#include "client/contract_json.h"
#include "client/report_format.h"

#include <google/protobuf/descriptor.h>

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

namespace {

bool IsListing(const google::protobuf::Descriptor& type) {
  bool rows = false;
  for (int i = 0; i < type.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *type.field(i);
    const bool message = field.cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE;
    if (message && (!field.is_repeated() || field.is_map())) return false;
    rows = rows || message;
  }
  return rows;
}

}  // namespace

absl::StatusOr<std::string> MessageToJsonLines(const google::protobuf::Message& message) {
  const google::protobuf::Descriptor& type = *message.GetDescriptor();
  if (!IsListing(type)) {
    absl::StatusOr<std::string> line = MessageToJsonLine(message);
    if (!line.ok()) return line.status();
    return *line + "\n";
  }
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  std::string lines;
  for (int i = 0; i < type.field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = type.field(i);
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    for (int j = 0; j < reflection.FieldSize(message, field); ++j) {
      absl::StatusOr<std::string> line =
          MessageToJsonLine(reflection.GetRepeatedMessage(message, field, j));
      if (!line.ok()) return line.status();
      lines += *line;
      lines += '\n';
    }
  }
  return lines;
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
