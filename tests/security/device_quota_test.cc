// Device-seconds per owner (--owner-device-seconds-per-hour, server/device/owner_job_limit.h):
// the budget's arithmetic against hand-summed charges, then from the outside, a real server
// on loopback with a token file of two owners and a budget one job exhausts: the owner's
// second job is refused before it is queued, the other owner's first one runs.
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/device/owner_job_limit.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr char kAliceToken[] = "alice-SECRET-5b0e11";
constexpr char kBobToken[] = "bob-SECRET-c2a7f4";

TEST(OwnerDeviceBudget, ChargesOfTheWindowAddUpPerOwner) {
  server::OwnerJobLimit limit(0, server::OwnerDeviceBudget{3, 3600});
  ASSERT_TRUE(limit.Acquire("alice").ok());
  limit.Release("alice");
  limit.Charge("alice", 2);
  ASSERT_TRUE(limit.Acquire("alice").ok()) << "2 of 3 device-seconds used";
  limit.Release("alice");
  limit.Charge("alice", 1.5);
  EXPECT_DOUBLE_EQ(limit.used_seconds("alice"), 3.5);
  const absl::Status refused = limit.Acquire("alice");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("'alice' has used 3.500 device-seconds"));
  EXPECT_THAT(refused.message(), HasSubstr("--owner-device-seconds-per-hour 3"));
  // Both charges must leave the window (3.5 - 2 = 1.5 < 3 only once the first has gone):
  // the first one's, at about an hour from now.
  EXPECT_THAT(std::string(refused.message()), MatchesRegex(".*accepted in 3[56][0-9][0-9] s.*"));
  EXPECT_EQ(limit.held("alice"), 0u) << "a refused job holds no place";
  EXPECT_TRUE(limit.Acquire("bob").ok()) << "another owner's budget is its own";
}

TEST(OwnerDeviceBudget, NoBudgetChargesNothing) {
  server::OwnerJobLimit limit(0);
  limit.Charge("alice", 1e9);
  EXPECT_EQ(limit.used_seconds("alice"), 0);
  EXPECT_TRUE(limit.Acquire("alice").ok());
}

std::unique_ptr<grpc::ClientContext> As(const char* token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  context->AddMetadata("authorization", std::string("Bearer ") + token);
  return context;
}

TEST(OwnerDeviceBudget, AnOwnerPastItsBudgetIsRefusedAndAnotherIsNot) {
  server::ServerOptions o = LoopbackOptions();
  o.auth_token = std::string("alice:") + kAliceToken + "\nbob:" + kBobToken + "\n";
  // Any job uses more than a microsecond of the device.
  o.owner_device_seconds_per_hour = 1e-6;
  client::ClientOptions client_options;
  client_options.bearer_token = kAliceToken;
  TestServer server = StartServer(o, {}, client_options);
  ASSERT_NE(server.server, nullptr);
  auto stub = server.NewRawStub();
  const v1::RunRequest run = SmallRun(4, 64);
  v1::RunResponse response;
  const grpc::Status first = stub->Run(As(kAliceToken).get(), run, &response);
  ASSERT_TRUE(first.ok()) << first.error_message();
  // A job is charged once its worker is done with it, just after its answer has gone out:
  // a second Run sent at once may be queued before the first one's charge lands, and is
  // then charged in turn. The charge lands within microseconds; tries for 30 s cover a
  // loaded machine.
  grpc::Status second;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (second.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
         std::chrono::steady_clock::now() < give_up) {
    second = stub->Run(As(kAliceToken).get(), run, &response);
    if (second.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_THAT(second.error_message(), HasSubstr("owner 'alice' has used"));
  EXPECT_THAT(second.error_message(), HasSubstr("--owner-device-seconds-per-hour"));
  const grpc::Status bobs = stub->Run(As(kBobToken).get(), run, &response);
  EXPECT_TRUE(bobs.ok()) << bobs.error_message();
}

}  // namespace
}  // namespace kerneleval::testing
