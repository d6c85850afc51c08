// The nightly gate from the outside: the real `kerneleval` binary (stdout and stderr to files,
// as under cron) against a real server on loopback with a --data-dir. Exit codes mean one
// thing each and every --help lists them; a bench that did not measure everything exits
// "incomplete" naming its run; `bench --compare-to previous` compares with the newest complete
// run of the same suite content and protocol, passes two runs of one build (A/A) and fails a
// planted 2x slowdown (the same kernel run twice per call: real work, real samples), a dropped
// implementation and a row that cannot be compared.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "server/device/cpu_backend.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

server::ServerOptions StoreOptions(const std::string& dir) {
  server::ServerOptions o = LoopbackOptions();
  o.submissions.data_dir = dir;
  return o;
}

// The built-ins, with cpu_fused doing its whole call twice: a 2x slowdown that is measured,
// not written into the store.
std::vector<std::unique_ptr<server::Backend>> TwiceAsSlowCpuFused() {
  std::vector<server::CpuImplementation> impls = server::BuiltinCpuImplementations();
  for (server::CpuImplementation& impl : impls) {
    if (impl.name != "cpu_fused") continue;
    impl.run = [](const FusedAddRmsNormArgs& args, void*) {
      FusedAddRmsNormCpu(args);
      FusedAddRmsNormCpu(args);
    };
    impl.run_on_threads = [](const FusedAddRmsNormArgs& args, void*, CpuThreadPool& threads) {
      FusedAddRmsNormCpu(args, &threads);
      FusedAddRmsNormCpu(args, &threads);
    };
  }
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu", std::move(impls)));
  return backends;
}

// The gate's practical threshold for CPU timings in these tests (the most --threshold takes).
constexpr char kCpuGateThreshold[] = "0.5";

std::vector<std::string> Bench(const TestServer& t, const std::string& suite,
                               std::vector<std::string> more) {
  std::vector<std::string> args = {"--target", t.target(),      "bench", "--suite-file",
                                   suite,      "--device",      "cpu",   "--warmup",
                                   "20",       "--repetitions", "200"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string StoredRun(const Process& p) {
  const std::vector<std::string> ids = Matches(p.err, R"(stored as run ([0-9a-f]{32}))");
  return ids.size() == 1 ? ids[0] : "";
}

TEST(NightlyGate, EveryHelpEndsWithTheExitCodes) {
  const std::string dir = TempDir("gate-help");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"bench", "--help"},
                                             {"compare", "--help"},
                                             {"history", "--help"},
                                             {"submissions", "list", "--help"}}) {
    const Process p = RunCli(dir, args);
    EXPECT_EQ(p.rc, 0) << args[0] << p.err;
    EXPECT_NE(p.out.find("Exit codes:"), std::string::npos) << args[0] << p.out;
    for (const char* line : {"0    success", "1    regression", "2    usage", "3    incorrect",
                             "4    incomplete", "5    infrastructure", "130  interrupted"}) {
      EXPECT_NE(p.out.find(line), std::string::npos) << line << " in " << p.out;
    }
  }
  const Process version = RunCli(dir, {"--version"});
  EXPECT_EQ(version.rc, 0) << version.err;
  EXPECT_EQ(version.out.rfind("kerneleval ", 0), 0u) << version.out;

  const Process unknown = RunCli(dir, {"--target", "127.0.0.1:1", "frobnicate"});
  EXPECT_EQ(unknown.rc, client::kExitUsage);
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'; commands: devices"), std::string::npos)
      << unknown.err;
  // Nothing listens on port 1: infrastructure, not a regression.
  const Process down = RunCli(dir, {"--target", "127.0.0.1:1", "--deadline", "5", "devices"});
  EXPECT_EQ(down.rc, client::kExitInfrastructure) << down.err;
  std::filesystem::remove_all(dir);
}

// Cut by --max-total-seconds (results skipped) or by --deadline: exit 4, what finished on
// stdout, the run id on stderr; the store keeps the run as incomplete, and history --complete
// leaves it out.
TEST(NightlyGate, AnIncompleteBenchExitsIncompleteAndNamesItsRun) {
  const std::string dir = TempDir("gate-incomplete");
  TestServer t = StartServer(StoreOptions(dir + "/data"));
  const std::string suite = SuiteFile(dir, "gate_long", 30, 4096);

  const Process cut = RunCli(dir, Bench(t, suite, {"--hot", "--max-total-seconds", "0.05"}));
  EXPECT_EQ(cut.rc, client::kExitIncomplete) << cut.err;
  EXPECT_NE(cut.err.find("incomplete: "), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("skipped (--max-total-seconds cut the run)"), std::string::npos)
      << cut.err;
  const std::string cut_run = StoredRun(cut);
  ASSERT_FALSE(cut_run.empty()) << cut.err;
  EXPECT_NE(cut.out.find("batch_size=1"), std::string::npos) << cut.out;

  // Cold on the CPU reads twice the last-level cache before every call: 30 workloads take far
  // longer than 3 s.
  const Process late =
      RunCli(dir, {"--target", t.target(), "--deadline", "3", "bench", "--suite-file", suite,
                   "--device", "cpu", "--cold", "--format", "json"});
  EXPECT_EQ(late.rc, client::kExitIncomplete) << late.err;
  // The partial report carries the protocol the server resolved (its defaults: warm-up 10,
  // 50 repetitions, seed 200), not zeros.
  const nlohmann::json partial = nlohmann::json::parse(late.out, nullptr, false);
  ASSERT_FALSE(partial.is_discarded()) << late.out;
  EXPECT_EQ(partial["protocol"].value("warmup", 0), 10) << late.out;
  EXPECT_EQ(partial["protocol"].value("repetitions", 0), 50) << late.out;
  EXPECT_EQ(partial["protocol"].value("seed", 0), 200) << late.out;
  EXPECT_NE(late.err.find("incomplete: --deadline 3 s passed after"), std::string::npos)
      << late.err;
  const std::vector<std::string> late_run =
      Matches(late.err, R"(partial run stored as run ([0-9a-f]{32}))");
  ASSERT_EQ(late_run.size(), 1u) << late.err;

  const Process complete = RunCli(dir, Bench(t, suite, {"--hot", "--impl", "cpu_fused"}));
  ASSERT_EQ(complete.rc, client::kExitOk) << complete.err;
  const std::string complete_run = StoredRun(complete);
  ASSERT_FALSE(complete_run.empty()) << complete.err;

  // Every run in history, the complete one alone with --complete; each with its protocol.
  std::string all;
  for (int i = 0; i < 100; ++i) {
    all = Cli(t.target(), {"history", "--runs"}).out;
    if (all.find(complete_run) != std::string::npos && all.find(late_run[0]) != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const std::string& run : {cut_run, late_run[0], complete_run}) {
    EXPECT_NE(all.find(run), std::string::npos) << run << "\n" << all;
  }
  EXPECT_NE(all.find("hot cache, warm-up 20, 200 repetitions"), std::string::npos) << all;
  EXPECT_NE(all.find("cold cache"), std::string::npos) << all;
  // What the deadline cut is stored as: a result passed only with every timed sample the
  // protocol asked for (50 by default), the rest skipped, never a passed result of a few.
  const CliResult late_results =
      Cli(t.target(), {"history", "--run", late_run[0], "--json", "--limit", "1000"});
  ASSERT_EQ(late_results.rc, 0) << late_results.err;
  const nlohmann::json stored = nlohmann::json::parse(late_results.out);
  int skipped = 0;
  for (const auto& s : stored["results"]) {
    const std::string status = s["result"]["status"];
    if (status == "passed") {
      EXPECT_EQ(s["result"]["latency"]["samples"], 50) << s.dump();
    } else {
      EXPECT_EQ(status, "skipped") << s.dump();
      ++skipped;
    }
  }
  EXPECT_GT(skipped, 0) << stored.dump();
  const CliResult only = Cli(t.target(), {"history", "--runs", "--complete"});
  ASSERT_EQ(only.rc, 0) << only.err;
  EXPECT_NE(only.out.find(complete_run), std::string::npos) << only.out;
  EXPECT_EQ(only.out.find(cut_run), std::string::npos) << only.out;
  EXPECT_EQ(only.out.find(late_run[0]), std::string::npos) << only.out;
  std::filesystem::remove_all(dir);
}

// A/A: two runs of one build pass the gate; the previous run is the newest complete one of
// the same protocol (a cold run in between is skipped). A/B with cpu_fused doing twice the
// work: the gate fails, calling the rows SLOWER.
TEST(NightlyGate, ComparesToThePreviousRunPassesAnAAPairAndFailsA2xSlowdown) {
  const std::string dir = TempDir("gate-aa");
  const std::string suite = SuiteFile(dir, "gate_suite", 2, 4096);
  std::string first, second;
  {
    TestServer t = StartServer(StoreOptions(dir + "/data"));
    const Process a = RunCli(dir, Bench(t, suite, {"--hot", "--impl", "cpu_fused"}));
    ASSERT_EQ(a.rc, client::kExitOk) << a.err;
    first = StoredRun(a);
    ASSERT_FALSE(first.empty()) << a.err;
    // Another protocol in between: not a baseline for a hot run.
    const Process cold =
        RunCli(dir, {"--target", t.target(), "bench", "--suite-file", suite, "--device", "cpu",
                     "--impl", "cpu_fused", "--warmup", "2", "--repetitions", "20", "--cold"});
    ASSERT_EQ(cold.rc, client::kExitOk) << cold.err;
    const std::string cold_run = StoredRun(cold);

    // Two runs of one build on a shared 2-core machine drift apart by more than either run's
    // own noise (+15% seen at 1 us, IQR 3%, with other tests beside it), so the A/A gate
    // runs with the widest threshold; a 2x slowdown is far past it.
    const Process again = RunCli(dir, Bench(t, suite,
                                            {"--hot", "--impl", "cpu_fused", "--compare-to",
                                             "previous", "--threshold", kCpuGateThreshold}));
    EXPECT_EQ(again.rc, client::kExitOk) << again.out << again.err;
    EXPECT_NE(again.out.find("compared with the previous run " + first), std::string::npos)
        << again.out;
    EXPECT_EQ(again.out.find("SLOWER"), std::string::npos) << again.out;
    second = StoredRun(again);
    ASSERT_FALSE(second.empty()) << again.err;

    // A hot run against a cold one: not comparable, which fails a gate unless told otherwise.
    const Process mixed = RunCli(dir, {"--target", t.target(), "compare", first, cold_run});
    EXPECT_EQ(mixed.rc, client::kExitRegression) << mixed.out << mixed.err;
    EXPECT_NE(mixed.out.find("not comparable: cache hot vs cold"), std::string::npos) << mixed.out;
    // Each side's protocol is named above the table.
    EXPECT_NE(mixed.out.find("protocol: baseline hot_custom, candidate cold_custom"),
              std::string::npos)
        << mixed.out;
    EXPECT_NE(mixed.err.find("--fail-on incomparable: 2 comparisons not comparable"),
              std::string::npos)
        << mixed.err;
    EXPECT_EQ(
        RunCli(dir, {"--target", t.target(), "compare", first, cold_run, "--fail-on", "none"}).rc,
        client::kExitOk);
    // History and export by protocol: "the previous comparable run" is a question the store
    // answers, and the other protocol's run is not in the answer.
    const Process hot_runs =
        RunCli(dir, {"--target", t.target(), "history", "--runs", "--protocol", "hot_custom"});
    ASSERT_EQ(hot_runs.rc, client::kExitOk) << hot_runs.err;
    EXPECT_NE(hot_runs.out.find(first), std::string::npos) << hot_runs.out;
    EXPECT_NE(hot_runs.out.find(second), std::string::npos) << hot_runs.out;
    EXPECT_EQ(hot_runs.out.find(cold_run), std::string::npos) << hot_runs.out;
    const Process cold_rows = RunCli(
        dir, {"--target", t.target(), "export", "--format", "csv", "--protocol", "cold_custom"});
    ASSERT_EQ(cold_rows.rc, client::kExitOk) << cold_rows.err;
    EXPECT_EQ(Matches(cold_rows.out, R"((cold_custom))").size(), 2u) << cold_rows.out;
    EXPECT_EQ(cold_rows.out.find(first), std::string::npos) << cold_rows.out;
    const Process unknown =
        RunCli(dir, {"--target", t.target(), "history", "--protocol", "lukewarm"});
    EXPECT_NE(unknown.rc, client::kExitOk);
    EXPECT_NE(unknown.err.find("filter.protocol: 'lukewarm' is not a protocol label"),
              std::string::npos)
        << unknown.err;
    t.server->Shutdown(absl::Seconds(5));  // the writer drains its queue on the way down
    t.server.reset();
  }
  TestServer slow = StartServer(StoreOptions(dir + "/data"), TwiceAsSlowCpuFused());
  const Process b = RunCli(dir, Bench(slow, suite,
                                      {"--hot", "--impl", "cpu_fused", "--compare-to", "previous",
                                       "--threshold", kCpuGateThreshold}));
  EXPECT_EQ(b.rc, client::kExitRegression) << b.out << b.err;
  EXPECT_NE(b.out.find("compared with the previous run " + second), std::string::npos) << b.out;
  EXPECT_EQ(Matches(b.out, R"((SLOWER))").size(), 2u) << b.out;
  EXPECT_NE(b.err.find("--fail-on slower: 2 comparisons slower"), std::string::npos) << b.err;
  // The server's own verdict on arrival (against the series' pooled baseline) is kept with
  // each result: history shows it, as text and as JSON. It is written just after the run.
  const std::string slow_run = StoredRun(b);
  std::size_t slower = 0;
  for (int i = 0; i < 100 && slower < 2; ++i) {
    const Process h =
        RunCli(dir, {"--target", slow.target(), "--json", "history", "--run", slow_run});
    ASSERT_EQ(h.rc, client::kExitOk) << h.err;
    slower = Matches(h.out, R"re("change":\s*"(slower)")re").size();
    if (slower < 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(slower, 2u);
  const Process table = RunCli(dir, {"--target", slow.target(), "history", "--run", slow_run});
  EXPECT_EQ(Matches(table.out, R"((slower x[0-9.]+))").size(), 2u) << table.out;
  std::filesystem::remove_all(dir);
}

// An implementation the previous run had and this one lacks fails the gate, named.
TEST(NightlyGate, ADroppedImplementationFailsTheGate) {
  const std::string dir = TempDir("gate-missing");
  TestServer t = StartServer(StoreOptions(dir + "/data"));
  const std::string suite = SuiteFile(dir, "gate_missing", 2, 1024);
  const Process both =
      RunCli(dir, Bench(t, suite, {"--hot", "--impl", "cpu_fused", "--impl", "cpu_unfused"}));
  ASSERT_EQ(both.rc, client::kExitOk) << both.err;
  const Process one =
      RunCli(dir, Bench(t, suite, {"--hot", "--impl", "cpu_fused", "--compare-to", "previous"}));
  EXPECT_EQ(one.rc, client::kExitRegression) << one.out << one.err;
  EXPECT_NE(one.out.find("MISSING from the candidate: batch_size=1 cpu_unfused"), std::string::npos)
      << one.out;
  EXPECT_NE(one.err.find("--fail-on missing: 2 comparisons missing from the candidate"),
            std::string::npos)
      << one.err;
  // The same comparison as JSON lists the rows.
  const std::string candidate = StoredRun(one);
  const Process json =
      RunCli(dir, {"--target", t.target(), "--json", "compare", "previous", candidate});
  EXPECT_EQ(json.rc, client::kExitRegression) << json.err;
  EXPECT_EQ(Matches(json.out, R"re("missing_from":\s*"(candidate)")re").size(), 2u) << json.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerneleval::testing
