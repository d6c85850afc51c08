#include "client/raw_messages.h"

#include <cstdint>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kerneleval::client {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

std::string EncodeStringField(int field, std::string_view value) {
  std::string out;
  {
    StringOutputStream stream(&out);
    CodedOutputStream coded(&stream);
    coded.WriteTag(WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint32(static_cast<uint32_t>(value.size()));
    coded.WriteRaw(value.data(), static_cast<int>(value.size()));
  }
  return out;
}

CodedInputStream MakeInput(std::string_view bytes) {
  return CodedInputStream(reinterpret_cast<const uint8_t*>(bytes.data()),
                          static_cast<int>(bytes.size()));
}

bool IsLengthDelimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}

// Reads a length-delimited field's payload after its tag.
bool ReadBytes(CodedInputStream* in, std::string* value) {
  uint32_t size = 0;
  return in->ReadVarint32(&size) && in->ReadString(value, static_cast<int>(size));
}

absl::Status Malformed(const std::string& what) {
  return absl::DataLossError(absl::StrCat("malformed ", what));
}

absl::StatusOr<std::string> DecodeServiceName(std::string_view bytes) {
  CodedInputStream in = MakeInput(bytes);
  std::string name;
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 1 && IsLengthDelimited(tag)) {
      if (!ReadBytes(&in, &name)) return Malformed("ServiceResponse");
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return Malformed("ServiceResponse");
    }
  }
  return name;
}

absl::Status DecodeErrorResponse(std::string_view bytes) {
  CodedInputStream in = MakeInput(bytes);
  uint32_t code = 0;
  std::string message;
  while (uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    bool ok = true;
    if (field == 1 && !IsLengthDelimited(tag)) {
      ok = in.ReadVarint32(&code);
    } else if (field == 2 && IsLengthDelimited(tag)) {
      ok = ReadBytes(&in, &message);
    } else {
      ok = WireFormatLite::SkipField(&in, tag);
    }
    if (!ok) return Malformed("ErrorResponse");
  }
  return absl::UnknownError(absl::StrCat("reflection error ", code, ": ", message));
}

}  // namespace

std::string EncodeHealthCheckRequest(std::string_view service) {
  // proto3 omits an empty string field.
  return service.empty() ? std::string() : EncodeStringField(1, service);
}

absl::StatusOr<ServingStatus> DecodeHealthCheckResponse(std::string_view bytes) {
  CodedInputStream in = MakeInput(bytes);
  uint32_t status = 0;
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 1 &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint32(&status)) return Malformed("HealthCheckResponse");
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return Malformed("HealthCheckResponse");
    }
  }
  if (!in.ConsumedEntireMessage()) return Malformed("HealthCheckResponse");
  if (status > 3) return ServingStatus::kUnknown;
  return static_cast<ServingStatus>(status);
}

std::string EncodeListServicesRequest() {
  // A oneof member is sent even when empty: the field's presence selects the request kind.
  return EncodeStringField(7, "");
}

absl::StatusOr<std::vector<std::string>> DecodeListServicesResponse(std::string_view bytes) {
  CodedInputStream in = MakeInput(bytes);
  std::vector<std::string> services;
  bool saw_list = false;
  while (uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if ((field == 6 || field == 7) && IsLengthDelimited(tag)) {
      std::string payload;
      if (!ReadBytes(&in, &payload)) return Malformed("ServerReflectionResponse");
      if (field == 7) return DecodeErrorResponse(payload);
      saw_list = true;
      CodedInputStream list = MakeInput(payload);
      while (uint32_t entry_tag = list.ReadTag()) {
        if (WireFormatLite::GetTagFieldNumber(entry_tag) == 1 && IsLengthDelimited(entry_tag)) {
          std::string entry;
          if (!ReadBytes(&list, &entry)) return Malformed("ListServiceResponse");
          absl::StatusOr<std::string> name = DecodeServiceName(entry);
          if (!name.ok()) return name.status();
          services.push_back(*std::move(name));
        } else if (!WireFormatLite::SkipField(&list, entry_tag)) {
          return Malformed("ListServiceResponse");
        }
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return Malformed("ServerReflectionResponse");
    }
  }
  if (!in.ConsumedEntireMessage()) return Malformed("ServerReflectionResponse");
  if (!saw_list) return Malformed("ServerReflectionResponse: no list_services_response");
  return services;
}

}  // namespace kerneleval::client
