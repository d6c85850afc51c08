// Run's time decomposition (RunResponse.timing) from a real server on a loopback port, with the
// device in the server process and in a device host: every hop is reported, none is negative,
// and the disjoint hops add up to no more than the call took as its caller saw it.
#include <chrono>
#include <cstdlib>
#include <string>

#include "server/device/device_settings.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using Clock = std::chrono::steady_clock;

server::ServerOptions InProcess() {
  server::ServerOptions o = LoopbackOptions();
  o.device = "cpu";
  o.device_isolation = server::DeviceIsolation::kThread;
  return o;
}

server::ServerOptions InDeviceHost() {
  server::ServerOptions o = LoopbackOptions();
  o.device = "cpu";
  o.device_isolation = server::DeviceIsolation::kProcess;
  o.device_host_path = DeviceHostPath();
  o.device_call_timeout_seconds = 120;  // generous: a busy 2-core machine
  return o;
}

// The hops that RunTiming documents as disjoint (kernel is inside device, hand-off inside
// queue).
double DisjointHops(const v1::RunTiming& t) {
  return t.validate_seconds() + t.queue_seconds() + t.prepare_seconds() +
         t.host_to_device_seconds() + t.device_seconds() + t.device_to_host_seconds() +
         t.device_host_seconds() + t.check_seconds() + t.respond_seconds();
}

void ExpectConsistentTiming(TestServer& t, bool in_device_host) {
  ASSERT_NE(t.client, nullptr);
  for (v1::Mode mode : {v1::MODE_OUTPUT, v1::MODE_IN_PLACE}) {
    for (bool check : {false, true}) {
      SCOPED_TRACE(::testing::Message() << v1::Mode_Name(mode) << " check=" << check);
      v1::RunRequest request = SmallRun(3, 40);
      request.set_mode(mode);
      request.set_check_correctness(check);
      v1::RunResponse response;
      const auto t0 = Clock::now();
      const grpc::Status s = t.client->Run(request, &response);
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_TRUE(response.has_timing());
      const v1::RunTiming& timing = response.timing();
      for (double v :
           {timing.validate_seconds(), timing.queue_seconds(), timing.handoff_seconds(),
            timing.prepare_seconds(), timing.host_to_device_seconds(), timing.device_seconds(),
            timing.device_to_host_seconds(), timing.device_host_seconds(), timing.kernel_seconds(),
            timing.check_seconds(), timing.respond_seconds(), timing.server_seconds()}) {
        EXPECT_GE(v, 0) << timing.DebugString();
      }
      EXPECT_GT(timing.device_seconds(), 0) << timing.DebugString();
      EXPECT_LE(timing.kernel_seconds(), timing.device_seconds()) << timing.DebugString();
      EXPECT_LE(timing.handoff_seconds(), timing.queue_seconds()) << timing.DebugString();
      EXPECT_EQ(timing.check_seconds() > 0, check) << timing.DebugString();
      // The round trip to a device host is there exactly when there is one.
      EXPECT_EQ(timing.device_host_seconds() > 0, in_device_host) << timing.DebugString();
      if (mode == v1::MODE_IN_PLACE || in_device_host) {
        EXPECT_GT(timing.host_to_device_seconds(), 0) << timing.DebugString();
      }
      // One clock reading apart at most (each hop is read off the same steady clock).
      EXPECT_LE(DisjointHops(timing), timing.server_seconds() + 1e-6) << timing.DebugString();
      EXPECT_LE(timing.server_seconds(), wall) << timing.DebugString();
    }
  }
}

// The hot path's polling: a worker that polls its queue after each job, and a device-host
// link polled on both ends (DeviceSettings::link_spin_us, handed to the device hosts; ctest
// runs each test in its own). Runs back to back are answered and timed as before, and the
// server stops cleanly with a worker mid-poll.
TEST(RunTiming, PollingWorkerAndLinkAnswerAsBefore) {
  server::DeviceSettings settings;
  settings.link_spin_us = 2000;
  server::ApplyDeviceSettings(settings);
  for (bool in_device_host : {false, true}) {
    SCOPED_TRACE(in_device_host ? "device host" : "in process");
    server::ServerOptions o = in_device_host ? InDeviceHost() : InProcess();
    o.worker_idle_spin_us = 2000;
    TestServer t = StartServer(o);
    ExpectConsistentTiming(t, in_device_host);
  }
}

TEST(RunTiming, DeviceInTheServerProcess) {
  TestServer t = StartServer(InProcess());
  ExpectConsistentTiming(t, /*in_device_host=*/false);
}

TEST(RunTiming, DeviceInADeviceHost) {
  TestServer t = StartServer(InDeviceHost());
  ExpectConsistentTiming(t, /*in_device_host=*/true);
}

}  // namespace
}  // namespace kerneleval::testing
