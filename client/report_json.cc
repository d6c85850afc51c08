// The JSON form of any response (MessageToJson).
#include <google/protobuf/util/json_util.h>

#include "client/report_format.h"

namespace kerneleval::client {

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  return json;
}

}  // namespace kerneleval::client
