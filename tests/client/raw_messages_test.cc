// The hand-encoded health and reflection messages against their protobuf wire encoding.
#include "client/raw_messages.h"

#include <string>

#include <gtest/gtest.h>

namespace kerneleval::client {
namespace {

TEST(HealthMessages, EncodeServiceAsField1) {
  EXPECT_EQ(EncodeHealthCheckRequest(""), "");
  EXPECT_EQ(EncodeHealthCheckRequest("readiness"), std::string("\x0a\x09readiness"));
}

TEST(HealthMessages, DecodeStatus) {
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x08\x01", 2)), ServingStatus::kServing);
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x08\x02", 2)), ServingStatus::kNotServing);
  EXPECT_EQ(*DecodeHealthCheckResponse(""), ServingStatus::kUnknown);
  // An unknown field before the status is skipped.
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x12\x01x\x08\x01", 5)),
            ServingStatus::kServing);
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x08", 1)).ok());
}

TEST(ReflectionMessages, ListServicesRequestIsAnEmptyField7) {
  EXPECT_EQ(EncodeListServicesRequest(), std::string("\x3a\x00", 2));
}

TEST(ReflectionMessages, DecodeListServicesResponse) {
  // list_services_response (6) { service (1) { name (1): "a.B" }, service { name: "grpc.X" } }
  const std::string service1 = std::string(
      "\x0a\x05\x0a\x03"
      "a.B",
      7);
  const std::string service2 = std::string(
      "\x0a\x08\x0a\x06"
      "grpc.X",
      10);
  const std::string list = service1 + service2;
  const std::string response = std::string("\x0a\x01h", 3) +  // valid_host, skipped
                               std::string("\x32") + static_cast<char>(list.size()) + list;
  absl::StatusOr<std::vector<std::string>> names = DecodeListServicesResponse(response);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"a.B", "grpc.X"}));
}

TEST(ReflectionMessages, ErrorResponseBecomesAnError) {
  // error_response (7) { error_code (1): 12, error_message (2): "no" }
  const std::string error = std::string("\x08\x0c\x12\x02no", 6);
  const std::string response = std::string("\x3a") + static_cast<char>(error.size()) + error;
  absl::StatusOr<std::vector<std::string>> names = DecodeListServicesResponse(response);
  ASSERT_FALSE(names.ok());
  EXPECT_NE(std::string(names.status().message()).find("12: no"), std::string::npos);
}

TEST(ReflectionMessages, TruncatedResponseIsAnError) {
  EXPECT_FALSE(DecodeListServicesResponse(std::string("\x32\x05\x0a", 3)).ok());
  EXPECT_FALSE(DecodeListServicesResponse("").ok());
}

}  // namespace
}  // namespace kerneleval::client
