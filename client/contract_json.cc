#include "client/contract_json.h"

#include <cmath>
#include <cstdint>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"

namespace kerneleval::client {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using Json = nlohmann::ordered_json;

void Rewrite(const Descriptor& type, Json* object);

// One value of `field` (an element when the field is repeated, a map entry's value).
void RewriteValue(const FieldDescriptor& field, Json* value) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
      if (std::int64_t n = 0;
          value->is_string() && absl::SimpleAtoi(value->get<std::string>(), &n)) {
        *value = n;
      }
      return;
    case FieldDescriptor::CPPTYPE_UINT64:
      if (std::uint64_t n = 0;
          value->is_string() && absl::SimpleAtoi(value->get<std::string>(), &n)) {
        *value = n;
      }
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      // "NaN", "Infinity", "-Infinity".
      if (value->is_string()) *value = nullptr;
      return;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const google::protobuf::EnumDescriptor& type = *field.enum_type();
      int number = 0;
      if (value->is_string()) {
        const auto* named = type.FindValueByName(value->get<std::string>());
        number = named == nullptr ? 0 : named->number();
      } else if (value->is_number_integer()) {
        number = value->get<int>();  // a value newer than this client's contract
      }
      *value = EnumShortName(type, number);
      return;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      // google.protobuf.* types have JSON forms of their own (a Timestamp is a string).
      if (value->is_object() && field.message_type()->file()->package() != "google.protobuf") {
        Rewrite(*field.message_type(), value);
      }
      return;
    default:
      return;
  }
}

void Rewrite(const Descriptor& type, Json* object) {
  for (auto& [key, value] : object->items()) {
    const FieldDescriptor* field = type.FindFieldByName(key);
    if (field == nullptr) continue;
    if (field->is_map()) {
      const FieldDescriptor& map_value = *field->message_type()->map_value();
      for (auto& [map_key, entry] : value.items()) RewriteValue(map_value, &entry);
    } else if (field->is_repeated()) {
      for (Json& element : value) RewriteValue(*field, &element);
    } else {
      RewriteValue(*field, &value);
    }
  }
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ContractJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string text;
  if (const auto status = google::protobuf::util::MessageToJsonString(message, &text, options);
      !status.ok()) {
    return absl::InternalError(
        absl::StrCat("JSON of ", message.GetTypeName(), ": ", std::string(status.message())));
  }
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InternalError(absl::StrCat("JSON of ", message.GetTypeName(), " does not parse"));
  }
  Rewrite(*message.GetDescriptor(), &json);
  return json;
}

}  // namespace kerneleval::client
