// The CLI's rough edges, against a real server on loopback with the CLI parsed and run
// in-process: a zero --batch said plainly, a target without a port, a hint when nothing
// listens, did-you-mean for mistyped suite and implementation names, the message-size flags
// named when a message is too large, `health` checking readiness by default, and Ctrl-C
// before a bench's first workload has finished.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "client/safetensors.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

struct Outcome {
  int rc = -1;
  std::string out, err;
};

Outcome Cli(const std::vector<std::string>& args) {
  client::cli::CliConfig config;
  Outcome o;
  if (absl::Status s = client::cli::ParseArgs(args, &config); !s.ok()) {
    o.rc = client::cli::kExitUsage;
    o.err = std::string(s.message());
    return o;
  }
  std::ostringstream out, err;
  o.rc = client::cli::RunCommand(config, out, err);
  o.out = out.str();
  o.err = err.str();
  return o;
}

TEST(CliRoughEdges, ZeroBatchIsSaidWithoutAHugeRange) {
  for (const char* flag : {"--batch", "--hidden"}) {
    SCOPED_TRACE(flag);
    std::vector<std::string> args = {"run", "--batch", "4", "--hidden", "8"};
    args[std::string(flag) == "--batch" ? 2 : 4] = "0";
    const Outcome o = Cli(args);
    EXPECT_EQ(o.rc, client::cli::kExitUsage);
    EXPECT_NE(o.err.find(flag), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("1 or more"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("e+"), std::string::npos) << o.err;
    EXPECT_LT(o.err.size(), 160u) << o.err;
  }
}

TEST(CliRoughEdges, TargetWithoutAPortDialsTheDefaultPort) {
  for (const auto& [given, dialled] :
       std::vector<std::pair<std::string, std::string>>{{"gpu-node-7", "gpu-node-7:50051"},
                                                        {"127.0.0.1", "127.0.0.1:50051"},
                                                        {"host:7000", "host:7000"},
                                                        {"dns:///host:7000", "dns:///host:7000"}}) {
    client::cli::CliConfig config;
    ASSERT_TRUE(client::cli::ParseArgs({"--target", given, "devices"}, &config).ok());
    EXPECT_EQ(config.global.targets.front(), dialled);
  }
}

TEST(CliRoughEdges, NothingListeningAsksWhetherTheServerRuns) {
  const Outcome o = Cli({"--target", "127.0.0.1:1", "--deadline", "5", "devices"});
  EXPECT_EQ(o.rc, client::cli::kExitInfrastructure);
  EXPECT_NE(o.err.find("UNAVAILABLE"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("is the server running at 127.0.0.1:1?"), std::string::npos) << o.err;
}

TEST(CliRoughEdges, MistypedNamesGetADidYouMean) {
  TestServer t = StartServer();
  const Outcome suite = Cli({"--target", t.target(), "bench", "--suite", "fused_add_rmsnorm_h248"});
  EXPECT_EQ(suite.rc, client::cli::kExitInfrastructure);
  EXPECT_NE(suite.err.find("NOT_FOUND"), std::string::npos) << suite.err;
  EXPECT_NE(suite.err.find("did you mean 'fused_add_rmsnorm_h2048'?"), std::string::npos)
      << suite.err;
  const Outcome impl = Cli({"--target", t.target(), "run", "--batch", "2", "--hidden", "8",
                            "--device", "cpu", "--impl", "cpu_fusd"});
  EXPECT_EQ(impl.rc, client::cli::kExitInfrastructure);
  EXPECT_NE(impl.err.find("did you mean 'cpu_fused'?"), std::string::npos) << impl.err;
  // Nothing near: no suggestion, only the list.
  const Outcome far = Cli({"--target", t.target(), "run", "--batch", "2", "--hidden", "8",
                           "--device", "cpu", "--impl", "zzzzzzzzzzzz"});
  EXPECT_EQ(far.rc, client::cli::kExitInfrastructure);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
  EXPECT_NE(far.err.find("available"), std::string::npos) << far.err;
}

TEST(CliRoughEdges, TooLargeAMessageNamesBothFlags) {
  TestServer t = StartServer();
  // 3 tensors of 1024 x 1024 fp32 = 12 MiB, past a 1 MiB client limit.
  const Outcome o = Cli({"--target", t.target(), "--max-message-mib", "1", "run", "--batch", "1024",
                         "--hidden", "1024", "--dtype", "fp32", "--device", "cpu"});
  EXPECT_EQ(o.rc, client::cli::kExitInfrastructure);
  EXPECT_NE(o.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("kerneleval-server --max-message-bytes"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("--max-message-mib"), std::string::npos) << o.err;
}

// `run` checks an answer; with its default single timed call it says that one sample is no
// measurement, and with repetitions it says nothing.
TEST(CliRoughEdges, RunOfOneTimedCallSaysItIsASingleSample) {
  TestServer t = StartServer();
  const Outcome one = Cli({"--target", t.target(), "run", "--batch", "2", "--hidden", "8"});
  EXPECT_EQ(one.rc, 0) << one.err;
  EXPECT_NE(one.err.find("note: one timed call (--repetitions 1) after 0 warm-up calls: its "
                         "latency is a single sample"),
            std::string::npos)
      << one.err;
  const Outcome many = Cli({"--target", t.target(), "run", "--batch", "2", "--hidden", "8",
                            "--warmup", "2", "--repetitions", "5"});
  EXPECT_EQ(many.rc, 0) << many.err;
  EXPECT_EQ(many.err.find("single sample"), std::string::npos) << many.err;
}

// A .npy file as np.save writes a C-ordered float32 array (format 1.0): the magic, the
// header padded with spaces to a multiple of 64 bytes with a newline, the data.
std::string NpyFloat32(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return bytes;
}

TEST(CliRoughEdges, RunTakesNumpyArrays) {
  TestServer t = StartServer();
  const std::string dir = ::testing::TempDir();
  const int64_t batch = 3, hidden = 8;
  std::vector<float> x(batch * hidden), r(batch * hidden), w(hidden);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    r[i] = 0.125f * static_cast<float>(i % 5);
  }
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + 0.1f * static_cast<float>(i);
  for (const auto& [name, shape, values] :
       {std::tuple{"x", std::vector<int64_t>{batch, hidden}, &x},
        {"r", std::vector<int64_t>{batch, hidden}, &r},
        {"w", std::vector<int64_t>{hidden}, &w}}) {
    std::ofstream(dir + "/" + name + ".npy", std::ios::binary) << NpyFloat32(shape, *values);
  }
  const std::string out = dir + "/npy-out.safetensors";
  const Outcome o =
      Cli({"--target", t.target(), "run", "--hidden-states", dir + "/x.npy", "--residual",
           dir + "/r.npy", "--weight", dir + "/w.npy", "--eps", "1e-6", "--output", out});
  ASSERT_EQ(o.rc, 0) << o.err;
  absl::StatusOr<client::SafetensorsFile> file = client::ReadSafetensors(out);
  ASSERT_TRUE(file.ok()) << file.status();
  const v1::Tensor& y = file->tensors.at("output");
  ASSERT_EQ(y.data().size(), x.size() * sizeof(float));
  // The fp64 reference, computed here from the same numbers.
  for (int64_t b = 0; b < batch; ++b) {
    double ss = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      const double s = double{x[b * hidden + i]} + double{r[b * hidden + i]};
      ss += s * s;
    }
    const double rstd = 1.0 / std::sqrt(ss / hidden + 1e-6);
    for (int64_t i = 0; i < hidden; ++i) {
      float got = 0;
      std::memcpy(&got, y.data().data() + (b * hidden + i) * sizeof(float), sizeof got);
      const double want =
          (double{x[b * hidden + i]} + double{r[b * hidden + i]}) * rstd * double{w[i]};
      EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::abs(want))) << b << "," << i;
    }
  }
  // A .npy given where a safetensors file goes is named, with the flags that take it.
  const Outcome wrong = Cli({"--target", t.target(), "run", "--input", dir + "/x.npy"});
  EXPECT_NE(wrong.rc, 0);
  EXPECT_NE(wrong.err.find("--input takes a safetensors file; give NumPy arrays as "
                           "--hidden-states, --residual and --weight"),
            std::string::npos)
      << wrong.err;
  // An array of a dtype the service does not take is refused naming the file.
  std::string f64 = NpyFloat32({2}, {1.f, 2.f, 3.f, 4.f});
  f64.replace(f64.find("<f4"), 3, "<f8");
  std::ofstream(dir + "/f64.npy", std::ios::binary) << f64;
  const Outcome bad = Cli({"--target", t.target(), "run", "--hidden-states", dir + "/f64.npy",
                           "--residual", dir + "/r.npy", "--weight", dir + "/w.npy"});
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("f64.npy: not a .npy file the service takes: dtype '<f8'"),
            std::string::npos)
      << bad.err;
}

TEST(CliRoughEdges, HealthChecksReadinessByDefault) {
  client::cli::CliConfig config;
  ASSERT_TRUE(client::cli::ParseArgs({"health"}, &config).ok());
  EXPECT_EQ(config.health_service, "readiness");
  TestServer t = StartServer();
  const Outcome ready = Cli({"--target", t.target(), "health"});
  EXPECT_EQ(ready.rc, 0) << ready.err;
  EXPECT_EQ(ready.out, "SERVING\n");
  const Outcome unknown = Cli({"--target", t.target(), "health", "--service", "no_such"});
  EXPECT_NE(unknown.rc, 0);
}

// Ctrl-C while the first (and only) workload still runs: no progress event has come, so no
// results, but the started event has named the run; the CLI still cancels, prints a JSON
// document a script can parse (complete: false, no results, the run id), names the partial
// run and exits 130. SIGINT goes to
// this process, as a terminal's Ctrl-C would, again and again until the command returns:
// the CLI's watcher turns it into a cancel; outside the watcher a no-op handler takes it.
TEST(CliRoughEdges, CtrlCBeforeTheFirstWorkloadPrintsAPartialReportAndExits130) {
  struct sigaction ignore {};
  ignore.sa_handler = [](int) {};
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGINT, &ignore, &previous), 0);

  TestServer t = StartServer();
  ASSERT_NE(t.server, nullptr);
  // One workload long enough to be interrupted on any machine: 4096 cold-cache calls on
  // 4 MiB tensors.
  const std::string suite = ::testing::TempDir() + "/ctrl_c_suite.json";
  std::ofstream(suite) << R"({"name": "ctrl_c", "op_type": "fused_add_rmsnorm",
  "mode": "output",
  "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 4096}},
  "inputs": {
    "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    "residual": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    "weight": {"shape": ["hidden_size"], "dtype": "float32"}
  },
  "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"}},
  "workloads": [{"axes": {"batch_size": 256}}]})";

  std::atomic<bool> done{false};
  std::thread ctrl_c([&done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    while (!done.load()) {
      kill(getpid(), SIGINT);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o =
      Cli({"--target", t.target(), "bench", "--suite-file", suite, "--impl", "cpu_fused",
           "--warmup", "0", "--repetitions", "4096", "--format", "json"});
  done.store(true);
  ctrl_c.join();
  sigaction(SIGINT, &previous, nullptr);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EXPECT_EQ(o.rc, client::cli::kExitInterrupted) << o.err;
  EXPECT_NE(o.err.find("interrupted: cancelled the benchmark after 0 results"), std::string::npos)
      << o.err;
  const std::size_t named = o.err.find("partial run stored as run ");
  ASSERT_NE(named, std::string::npos) << o.err;
  const nlohmann::json doc = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << o.out;
  EXPECT_EQ(doc["suite"], "ctrl_c");
  EXPECT_EQ(doc.value("run_id", ""),
            o.err.substr(named + std::string("partial run stored as run ").size(), 32));
  EXPECT_EQ(doc["complete"], false);
  ASSERT_TRUE(doc.contains("results")) << o.out;
  EXPECT_TRUE(doc["results"].empty());
  EXPECT_LT(seconds, 60) << "the cancel reached the server";
}

}  // namespace
}  // namespace kerneleval::testing
