// `kerneleval bench` fanned out over three real servers on loopback ports, through the CLI
// (argument parsing, the fan-out, the merged JSON and the exit code): one server gone before
// the run, or shut down while its benchmark runs; the other two still report.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "test_server.h"

namespace kerneleval {
namespace {

using testing::StartServer;
using testing::TestServer;

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun RunCli(const std::vector<std::string>& args) {
  client::cli::CliConfig config;
  CliRun run;
  const absl::Status parsed = client::cli::ParseArgs(args, &config);
  EXPECT_TRUE(parsed.ok()) << parsed;
  if (!parsed.ok()) return run;
  std::ostringstream out, err;
  run.code = client::cli::RunCommand(config, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

std::vector<std::string> BenchArgs(const std::vector<std::string>& targets) {
  std::vector<std::string> args;
  for (const std::string& t : targets) {
    args.push_back("--target");
    args.push_back(t);
  }
  for (const char* a :
       {"--deadline", "120", "bench", "--suite", "fused_add_rmsnorm_h2048", "--hot", "--warmup",
        "1", "--repetitions", "2", "--format", "json", "--concurrency", "3"}) {
    args.push_back(a);
  }
  return args;
}

// Checks a good target's entry: OK with a complete, correct report of the suite.
void ExpectGood(const nlohmann::json& entry, const std::string& target) {
  EXPECT_EQ(entry["target"], target);
  EXPECT_EQ(entry["status"], "OK");
  ASSERT_TRUE(entry["report"].is_object());
  EXPECT_EQ(entry["report"]["suite"], "fused_add_rmsnorm_h2048");
  EXPECT_EQ(entry["report"]["complete"], true);
  ASSERT_FALSE(entry["report"]["results"].empty());
  for (const nlohmann::json& r : entry["report"]["results"]) {
    EXPECT_EQ(r["status"], "passed") << r.dump();
  }
}

TEST(FanOutLoopback, ServerGoneBeforeTheRun) {
  TestServer a = StartServer();
  TestServer b = StartServer();
  TestServer c = StartServer();
  ASSERT_TRUE(a.server && b.server && c.server);
  const std::string gone = c.target();
  c.client.reset();
  c.server->Shutdown(absl::ZeroDuration());
  c.server.reset();  // Its port now refuses connections.

  const CliRun run = RunCli(BenchArgs({a.target(), gone, b.target()}));
  EXPECT_EQ(run.code, client::cli::kExitInfrastructure) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  ASSERT_EQ(doc["targets"].size(), 3u) << run.out;
  ExpectGood(doc["targets"][0], a.target());
  ExpectGood(doc["targets"][2], b.target());
  EXPECT_EQ(doc["targets"][1]["target"], gone);
  EXPECT_EQ(doc["targets"][1]["status"].get<std::string>().rfind("UNAVAILABLE: ", 0), 0u)
      << doc["targets"][1]["status"];
  EXPECT_TRUE(doc["targets"][1]["report"].is_null());
  EXPECT_EQ(doc["summary"]["succeeded"], 2);
  EXPECT_EQ(doc["summary"]["failed"], 1);
  // Two servers x (cpu_fused, cpu_unfused) on "cpu".
  EXPECT_EQ(doc["summary"]["implementations"].size(), 4u);
  EXPECT_NE(run.err.find("error: " + gone + ": UNAVAILABLE: "), std::string::npos) << run.err;
}

// cpu_fused that, once armed, blocks until released (or 20 s pass) after saying so.
struct Gate {
  std::atomic<bool> armed{false}, entered{false}, released{false};
};

void WaitAtGate(Gate* gate) {
  if (!gate->armed.load()) return;
  gate->entered = true;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!gate->released.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Gates whichever entry the backend calls: `run_on_threads` where set, else `run`.
std::vector<server::CpuImplementation> GatedImplementations(Gate* gate) {
  std::vector<server::CpuImplementation> impls = server::BuiltinCpuImplementations();
  for (server::CpuImplementation& impl : impls) {
    if (auto on_threads = impl.run_on_threads) {
      impl.run_on_threads = [gate, on_threads](const FusedAddRmsNormArgs& args, void* scratch,
                                               CpuThreadPool& threads) {
        WaitAtGate(gate);
        on_threads(args, scratch, threads);
      };
    }
    auto run = impl.run;
    impl.run = [gate, run](const FusedAddRmsNormArgs& args, void* scratch) {
      WaitAtGate(gate);
      run(args, scratch);
    };
  }
  return impls;
}

TEST(FanOutLoopback, ServerShutDownMidRun) {
  Gate gate;
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu", GatedImplementations(&gate)));
  TestServer slow = StartServer(testing::LoopbackOptions(), std::move(backends));
  TestServer a = StartServer();
  TestServer b = StartServer();
  ASSERT_TRUE(slow.server && a.server && b.server);
  gate.armed = true;

  CliRun run;
  std::thread cli([&] { run = RunCli(BenchArgs({a.target(), slow.target(), b.target()})); });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!gate.entered.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(gate.entered.load());
  // Shutdown cancels the running benchmark after the grace period, then joins the device
  // worker, which the gate holds until released.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    gate.released = true;
  });
  slow.server->Shutdown(absl::Milliseconds(200));
  release.join();
  cli.join();

  EXPECT_EQ(run.code, client::cli::kExitInfrastructure) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  ASSERT_EQ(doc["targets"].size(), 3u) << run.out;
  ExpectGood(doc["targets"][0], a.target());
  ExpectGood(doc["targets"][2], b.target());
  const std::string status = doc["targets"][1]["status"];
  EXPECT_TRUE(status.rfind("CANCELLED: ", 0) == 0 || status.rfind("UNAVAILABLE: ", 0) == 0)
      << status;
  EXPECT_TRUE(doc["targets"][1]["report"].is_null());
  EXPECT_EQ(doc["summary"]["failed"], 1);
}

// A free loopback port, found by binding port 0 and closing the socket.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// A node that refuses the first connection (it is still starting) is dialled again within the
// connect window, not reported unreachable.
TEST(FanOutLoopback, ANodeThatListensAMomentLateStillReports) {
  TestServer a = StartServer();
  ASSERT_TRUE(a.server);
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string late_target = "127.0.0.1:" + std::to_string(port);

  CliRun run;
  std::thread cli([&] { run = RunCli(BenchArgs({a.target(), late_target})); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  server::ServerOptions options = testing::LoopbackOptions();
  options.listen = late_target;
  TestServer late = StartServer(options);
  cli.join();
  ASSERT_TRUE(late.server);

  EXPECT_EQ(run.code, client::cli::kExitOk) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  ASSERT_EQ(doc["targets"].size(), 2u) << run.out;
  ExpectGood(doc["targets"][0], a.target());
  ExpectGood(doc["targets"][1], late_target);
  EXPECT_EQ(doc["summary"]["failed"], 0);
}

TEST(FanOutLoopback, SingleTargetOutputIsUnchanged) {
  TestServer a = StartServer();
  ASSERT_TRUE(a.server);
  const CliRun run = RunCli(BenchArgs({a.target()}));
  EXPECT_EQ(run.code, client::cli::kExitOk) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  // The report itself, as before the fan-out existed.
  EXPECT_FALSE(doc.contains("targets"));
  EXPECT_EQ(doc["suite"], "fused_add_rmsnorm_h2048");
}

}  // namespace
}  // namespace kerneleval
