// The command-line parser, without a server: what a scheduled job's argument list means.
#include "client/cli.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kerneleval::client::cli {
namespace {

absl::Status Parse(const std::vector<std::string>& args, CliConfig* config) {
  return ParseArgs(args, config);
}

TEST(CliParse, BenchWithRepeatedImplementationsAndGraph) {
  CliConfig config;
  ASSERT_TRUE(
      Parse({"bench", "--suite", "x", "--impl", "a", "--impl", "b", "--graph"}, &config).ok());
  EXPECT_EQ(config.command, "bench");
  EXPECT_EQ(config.bench.suite, "x");
  EXPECT_EQ(config.bench.implementations, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(config.bench.graph);
  EXPECT_EQ(config.global.targets, std::vector<std::string>{"localhost:50051"});
}

TEST(CliParse, GlobalFlagsBeforeOrAfterTheSubcommand) {
  CliConfig config;
  ASSERT_TRUE(Parse({"--target", "svc:50051", "--deadline", "900", "bench", "--suite", "x",
                     "--format", "csv", "--out", "r.csv", "--json"},
                    &config)
                  .ok());
  EXPECT_EQ(config.global.targets, std::vector<std::string>{"svc:50051"});
  EXPECT_DOUBLE_EQ(config.global.deadline_seconds, 900);
  EXPECT_TRUE(config.global.json);
  EXPECT_EQ(config.bench.format, "csv");
  EXPECT_EQ(config.bench.out, "r.csv");
}

TEST(CliParse, BenchProtocolFlags) {
  CliConfig config;
  ASSERT_TRUE(Parse({"bench",
                     "--suite",
                     "s",
                     "--adaptive",
                     "--min-samples",
                     "20",
                     "--max-samples",
                     "500",
                     "--target-spread",
                     "0.01",
                     "--max-seconds",
                     "3",
                     "--hot",
                     "--graph",
                     "--graph-calls",
                     "50",
                     "--rotate",
                     "--timer",
                     "cupti",
                     "--seed",
                     "7",
                     "--measure-copy",
                     "--measure-dram-bytes",
                     "--check-every-call",
                     "--all-devices"},
                    &config)
                  .ok());
  const BenchFlags& b = config.bench;
  EXPECT_TRUE(b.adaptive);
  EXPECT_EQ(b.min_samples, 20u);
  EXPECT_EQ(b.max_samples, 500u);
  EXPECT_DOUBLE_EQ(b.target_spread, 0.01);
  EXPECT_TRUE(b.hot);
  EXPECT_EQ(b.graph_calls, 50u);
  EXPECT_TRUE(b.rotate);
  EXPECT_EQ(b.timer, "cupti");
  EXPECT_EQ(b.seed, 7u);
  EXPECT_TRUE(b.measure_copy);
  EXPECT_TRUE(b.measure_dram_bytes);
  EXPECT_TRUE(b.check_every_call);
  EXPECT_TRUE(b.all_devices);
}

TEST(CliParse, RunWithRandomInputs) {
  CliConfig config;
  ASSERT_TRUE(Parse({"run", "--batch", "79", "--hidden", "2048", "--dtype", "fp16", "--mode",
                     "in_place", "--seed", "3", "--check", "--repetitions", "10", "--eps", "1e-5"},
                    &config)
                  .ok());
  EXPECT_EQ(config.command, "run");
  EXPECT_EQ(config.run.batch, 79);
  EXPECT_EQ(config.run.hidden, 2048);
  EXPECT_EQ(config.run.dtype, "fp16");
  EXPECT_EQ(config.run.mode, "in_place");
  EXPECT_TRUE(config.run.check);
  EXPECT_DOUBLE_EQ(config.run.eps, 1e-5);
}

// The same default as the Python client's Client.run(check=True): checked unless asked not.
TEST(CliParse, RunChecksCorrectnessUnlessNoCheck) {
  CliConfig checked;
  ASSERT_TRUE(Parse({"run", "--batch", "2", "--hidden", "8"}, &checked).ok());
  EXPECT_TRUE(checked.run.check);
  CliConfig unchecked;
  ASSERT_TRUE(Parse({"run", "--batch", "2", "--hidden", "8", "--no-check"}, &unchecked).ok());
  EXPECT_FALSE(unchecked.run.check);
}

TEST(CliParse, ListCommands) {
  for (const char* command : {"devices", "suites", "services"}) {
    CliConfig config;
    ASSERT_TRUE(Parse({command}, &config).ok()) << command;
    EXPECT_EQ(config.command, command);
  }
  CliConfig config;
  ASSERT_TRUE(Parse({"implementations", "--device", "cuda:0"}, &config).ok());
  EXPECT_EQ(config.implementations_device, "cuda:0");
  ASSERT_TRUE(Parse({"health", "--service", "readiness"}, &config).ok());
  EXPECT_EQ(config.health_service, "readiness");
}

TEST(CliParse, TokenFromEnvironment) {
  ::setenv("KERNELEVAL_TOKEN", "from-env\n", 1);
  CliConfig config;
  ASSERT_TRUE(Parse({"devices"}, &config).ok());
  ASSERT_TRUE(ResolveGlobalToken(&config.global).ok());
  EXPECT_EQ(config.global.token, "from-env");
  CliConfig flag;
  ASSERT_TRUE(Parse({"--token", "from-flag", "devices"}, &flag).ok());
  ASSERT_TRUE(ResolveGlobalToken(&flag.global).ok());
  EXPECT_EQ(flag.global.token, "from-flag");
  // The Secret's whole `token` key, as a secretKeyRef hands it over: the named owner's line.
  ::setenv("KERNELEVAL_TOKEN", "ops:s3cret\nprometheus:scrape\n", 1);
  CliConfig owner;
  ASSERT_TRUE(Parse({"--owner", "ops", "devices"}, &owner).ok());
  ASSERT_TRUE(ResolveGlobalToken(&owner.global).ok());
  EXPECT_EQ(owner.global.token, "s3cret");
  CliConfig unnamed;
  ASSERT_TRUE(Parse({"devices"}, &unnamed).ok());
  absl::Status refused = ResolveGlobalToken(&unnamed.global);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("$KERNELEVAL_TOKEN"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("--owner"), std::string::npos) << refused;
  EXPECT_EQ(refused.message().find("s3cret"), std::string::npos) << refused;
  ::unsetenv("KERNELEVAL_TOKEN");
}

TEST(CliParse, TokenFileExcludesToken) {
  CliConfig config;
  EXPECT_FALSE(Parse({"--token", "a", "--token-file", "f", "devices"}, &config).ok());
  CliConfig file;
  ASSERT_TRUE(Parse({"--token-file", "f", "--owner", "ops", "devices"}, &file).ok());
  EXPECT_EQ(file.global.token_file, "f");
  EXPECT_EQ(file.global.owner, "ops");
}

TEST(CliParse, BenchOnSeveralTargetsWithPushgateway) {
  CliConfig config;
  ASSERT_TRUE(Parse({"--target", "a:1", "--target", "b:2", "bench", "--suite", "x", "--target",
                     "c:3", "--concurrency", "2", "--pushgateway", "http://127.0.0.1:9091",
                     "--push-job", "nightly"},
                    &config)
                  .ok());
  EXPECT_EQ(config.global.targets, (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  EXPECT_EQ(config.bench.concurrency, 2);
  EXPECT_EQ(config.bench.pushgateway, "http://127.0.0.1:9091");
  EXPECT_EQ(config.bench.push_job, "nightly");
  CliConfig defaults;
  ASSERT_TRUE(Parse({"bench", "--suite", "x"}, &defaults).ok());
  EXPECT_EQ(defaults.bench.concurrency, 4);
  EXPECT_EQ(defaults.bench.pushgateway, "");
  EXPECT_EQ(defaults.bench.push_job, "kerneleval-benchmark");
}

TEST(CliParse, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {},                                               // no subcommand
      {"frobnicate"},                                   // unknown subcommand
      {"bench"},                                        // no suite
      {"bench", "--suite", "x", "--timer", "sundial"},  // bad timer
      {"bench", "--suite", "x", "--format", "xml"},     // bad format
      {"bench", "--suite", "x", "--hot", "--cold"},     // contradictory
      {"bench", "--suite", "x", "--min-samples", "5"},  // needs --adaptive
      {"bench", "--suite", "x", "--graph-calls", "5"},  // needs --graph
      {"run", "--batch", "4"},                          // no hidden
      {"run", "--batch", "4", "--hidden", "8", "--dtype", "int8"},
      {"run", "--batch", "0", "--hidden", "8"},
      {"--target", "a:1", "--target", "b:2", "devices"},  // several targets: bench only
      {"--target", "a:1", "--target", "b:2", "run", "--batch", "1", "--hidden", "8"},
      {"bench", "--suite", "x", "--concurrency", "0"},
      {"bench", "--suite", "x", "--push-job", "j"},                  // needs --pushgateway
      {"bench", "--suite", "x", "--pushgateway", "127.0.0.1:9091"},  // no scheme
      {"bench", "--suite", "x", "--pushgateway", "http://h:1/a/b"},  // a path
      {"bench", "--suite", "x", "--pushgateway", "http://h:1", "--push-job", "a/b"},
      {"--target", "a:1", "--target", "b:2", "bench", "--suite", "x", "--format", "html"},
      {"bench", "--suite", "x", "--fail-on", "slower"},  // needs --compare-to
      {"bench", "--suite", "x", "--compare-to", "previous", "--fail-on", "faster"},
      {"--target", "a:1", "--target", "b:2", "bench", "--suite", "x", "--compare-to",
       "previous"},  // one target only
      {"history", "--complete"},  // needs --runs
  };
  for (const auto& args : bad) {
    CliConfig config;
    const absl::Status status = Parse(args, &config);
    EXPECT_FALSE(status.ok()) << "accepted: " << ::testing::PrintToString(args);
  }
}

// The nightly gate's flags, and a command that does not exist named as such (CLI11 alone
// said "A subcommand is required").
TEST(CliParse, CompareToAndUnknownCommands) {
  CliConfig config;
  ASSERT_TRUE(Parse({"bench", "--suite", "x", "--compare-to", "previous", "--fail-on",
                     "slower,missing", "--threshold", "0.05"},
                    &config)
                  .ok());
  EXPECT_EQ(config.bench.compare_to, "previous");
  EXPECT_EQ(config.bench.fail_on, (std::vector<std::string>{"slower", "missing"}));
  EXPECT_DOUBLE_EQ(config.bench.threshold, 0.05);
  CliConfig unknown;
  const absl::Status status = Parse({"--target", "a:1", "frobnicate"}, &unknown);
  EXPECT_NE(status.message().find("unknown command 'frobnicate'; commands: devices"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace kerneleval::client::cli
