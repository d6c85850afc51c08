// Hand-encoded messages of grpc.health.v1 and grpc.reflection.v1alpha.
//
// The system gRPC packages ship no generated code for these services, and compiling our own
// copies of their .proto files would register the same full names as the server's reflection
// library in one process (a descriptor-pool clash in tests that link both). Only a few fields
// are needed, so they are written and read with the protobuf wire primitives directly.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kerneleval::client {

inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";
inline constexpr char kReflectionMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// HealthCheckResponse.ServingStatus values.
enum class ServingStatus : int { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// HealthCheckRequest { string service = 1; }
std::string EncodeHealthCheckRequest(std::string_view service);
// HealthCheckResponse { ServingStatus status = 1; }; unknown fields are skipped.
absl::StatusOr<ServingStatus> DecodeHealthCheckResponse(std::string_view bytes);

// ServerReflectionRequest { oneof message_request { string list_services = 7; } }
std::string EncodeListServicesRequest();
// ServerReflectionResponse { oneof { ListServiceResponse list_services_response = 6;
// ErrorResponse error_response = 7; } } with ListServiceResponse { repeated ServiceResponse
// service = 1; } and ServiceResponse { string name = 1; }. An error_response becomes an error
// carrying its message.
absl::StatusOr<std::vector<std::string>> DecodeListServicesResponse(std::string_view bytes);

}  // namespace kerneleval::client
