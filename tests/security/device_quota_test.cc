// Device-seconds per owner (--owner-device-seconds-per-hour, server/device/owner_job_limit.h):
// the budget's arithmetic against hand-summed charges and running jobs' reservations, then
// from the outside, a real server on loopback with a token file of two owners: with a budget
// one job exhausts, the owner's second job is refused and the other owner's first one runs;
// with many concurrent Runs against a small budget, what is charged stays within the budget
// plus one job (it once overshot 3.4x: the budget was only checked as jobs were queued).
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/device/owner_job_limit.h"
#include "test_server.h"
#include "two_owners.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

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

TEST(OwnerDeviceBudget, RunningJobsCountAtLeastTheOwnersLongestJob) {
  server::OwnerJobLimit limit(0, server::OwnerDeviceBudget{3, 3600});
  limit.Charge("alice", 1);  // her longest job so far: what each running one reserves
  // Two jobs start at once on two devices, both seen: 1 charged + 1 reserved < 3, then
  // 1 + 2 reserved >= 3 for a third.
  absl::StatusOr<server::OwnerJobLimit::Running> first = limit.Start("alice");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<server::OwnerJobLimit::Running> second = limit.Start("alice");
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::StatusOr<server::OwnerJobLimit::Running> third = limit.Start("alice");
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("'alice' has used 3.000 device-seconds"));
  EXPECT_THAT(third.status().message(), HasSubstr("2.000 of them held by its 2 running jobs"));
  EXPECT_THAT(third.status().message(), HasSubstr("--owner-device-seconds-per-hour 3"));
  // Queued jobs are refused as early, and other owners are not.
  EXPECT_EQ(limit.Acquire("alice").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(limit.Start("bob").ok());
  // Charged as they run: their time so far, not their reservation, is what they used.
  EXPECT_LT(limit.used_seconds("alice"), 1.5);
  // Ended, they are charged what they took (well under a second each here): room again.
  limit.Finish(*first);
  limit.Finish(*second);
  EXPECT_LT(limit.used_seconds("alice"), 1.5);
  EXPECT_TRUE(limit.Start("alice").ok());
}

TEST(OwnerDeviceBudget, NoBudgetChargesNothing) {
  server::OwnerJobLimit limit(0);
  limit.Charge("alice", 1e9);
  EXPECT_EQ(limit.used_seconds("alice"), 0);
  EXPECT_TRUE(limit.Acquire("alice").ok());
}

TEST(OwnerDeviceBudget, AnOwnerPastItsBudgetIsRefusedAndAnotherIsNot) {
  server::ServerOptions o = LoopbackOptions();
  AdmitAliceAndBob(&o);
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
  // Refused at once: the worker charges the first job before it takes the next one, and
  // checks the budget again as it takes it.
  const grpc::Status second = stub->Run(As(kAliceToken).get(), run, &response);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_THAT(second.error_message(), HasSubstr("owner 'alice' has used"));
  EXPECT_THAT(second.error_message(), HasSubstr("--owner-device-seconds-per-hour"));
  const grpc::Status bobs = stub->Run(As(kBobToken).get(), run, &response);
  EXPECT_TRUE(bobs.ok()) << bobs.error_message();
}

// A Run that holds the CPU device for a good fraction of a second: 1000 timed calls on
// [64, 4096] fp32, outputs left out.
v1::RunRequest SlowRun() {
  v1::RunRequest run = SmallRun(64, 4096);
  run.set_repetitions(1000);
  run.set_omit_outputs(true);
  return run;
}

// The device-seconds a refusal says its owner used ("... has used 1.234 device-seconds").
double UsedIn(const std::string& refusal) {
  const std::string marker = "has used ";
  const std::size_t at = refusal.find(marker);
  return at == std::string::npos ? -1 : std::stod(refusal.substr(at + marker.size()));
}

TEST(OwnerDeviceBudget, ConcurrentRunsStayWithinTheBudgetPlusOneJob) {
  server::ServerOptions o = LoopbackOptions();
  AdmitAliceAndBob(&o);
  constexpr double kBudget = 1.0;
  o.owner_device_seconds_per_hour = kBudget;
  TestServer server = StartServer(o);
  ASSERT_NE(server.server, nullptr);
  auto stub = server.NewRawStub();
  // All queued at once, before any has been charged.
  constexpr int kRuns = 32;
  std::vector<grpc::Status> statuses(kRuns);
  std::vector<v1::RunResponse> responses(kRuns);
  std::vector<std::thread> callers;
  for (int i = 0; i < kRuns; ++i) {
    callers.emplace_back(
        [&, i] { statuses[i] = stub->Run(As(kAliceToken).get(), SlowRun(), &responses[i]); });
  }
  for (std::thread& t : callers) t.join();
  int ran = 0, refused = 0;
  double longest = 0;  // the longest job, as the server timed it on its worker
  for (int i = 0; i < kRuns; ++i) {
    if (statuses[i].ok()) {
      ++ran;
      const v1::RunTiming& t = responses[i].timing();
      longest = std::max(longest, t.server_seconds() - t.validate_seconds() - t.queue_seconds());
      continue;
    }
    ++refused;
    EXPECT_EQ(statuses[i].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << statuses[i].error_message();
    EXPECT_THAT(statuses[i].error_message(), HasSubstr("owner 'alice' has used"));
    EXPECT_THAT(statuses[i].error_message(), HasSubstr("--owner-device-seconds-per-hour 1"));
  }
  EXPECT_GE(ran, 1);
  EXPECT_GE(refused, 1) << ran << " Runs of up to " << longest << " s each all ran";
  // What was charged in all, as the next refusal says.
  v1::RunResponse response;
  const grpc::Status after = stub->Run(As(kAliceToken).get(), SmallRun(4, 64), &response);
  ASSERT_EQ(after.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << after.error_message();
  const double used = UsedIn(after.error_message());
  EXPECT_GE(used, kBudget);
  // The budget plus the one job that started under it. A job's charge also covers handing
  // its answer back to gRPC after server_seconds, a few milliseconds; 0.25 s is room for a
  // busy machine.
  EXPECT_LE(used, kBudget + longest + 0.25)
      << ran << " Runs ran, the longest " << longest << " s: " << after.error_message();
  const grpc::Status bobs = stub->Run(As(kBobToken).get(), SmallRun(4, 64), &response);
  EXPECT_TRUE(bobs.ok()) << bobs.error_message();
}

}  // namespace
}  // namespace kerneleval::testing
