// Run ids from the outside: the real `kerneleval` binary benches against a real server on
// loopback (stderr a file or a pipe, never a terminal) and must say which stored run it
// produced, in every format; `history --runs` lists that run; result ids sort naturally; a
// run id prefix is accepted when unique and refused, listing the candidates, when not; the
// time history prints is accepted back by --since; Ctrl-C cancels the bench, prints the
// partial results and the partial run's id and exits 130, during the first workload too.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

#include "cli_process.h"
#include "server/store/result_store.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

// The one row of `history --runs` output for `run`, "" when absent.
std::string RunRow(const std::string& history, const std::string& run) {
  std::istringstream lines(history);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(run) != std::string::npos) return line;
  }
  return "";
}

// Polls `history --runs` until `run` shows (the store writes after the answer).
std::string WaitForRun(const std::string& target, const std::string& run) {
  for (int i = 0; i < 100; ++i) {
    const CliResult r = Cli(target, {"history", "--runs"});
    if (std::string row = RunRow(r.out, run); !row.empty()) return row;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

TEST(RunIds, EveryFormatSaysWhichRunTheBenchStored) {
  const std::string dir = TempDir("run-ids");
  TestServer t = StartServer();
  const std::string suite = SuiteFile(dir, "run_ids_small", 2, 64);
  std::vector<std::string> ids;
  for (const char* format : {"table", "csv", "html", "json"}) {
    SCOPED_TRACE(format);
    const Process p = RunCli(
        dir, {"--target", t.target(), "bench", "--suite-file", suite, "--device", "cpu", "--impl",
              "cpu_fused", "--warmup", "0", "--repetitions", "2", "--format", format});
    ASSERT_EQ(p.rc, 0) << p.err;
    // Not a terminal: one plain progress line per workload, no bar redrawn with \r.
    EXPECT_EQ(Matches(p.err, R"((\[[12]/2\] batch_size=\d+ on cpu: cpu_fused))").size(), 2u)
        << p.err;
    EXPECT_EQ(p.err.find('\r'), std::string::npos) << p.err;
    std::string id;
    if (std::string(format) == "json") {
      const nlohmann::json report = nlohmann::json::parse(p.out, nullptr, false);
      ASSERT_TRUE(report.is_object()) << p.out;
      id = report.value("run_id", "");
      EXPECT_EQ(p.err.find("stored as run"), std::string::npos) << "stdout carries it: " << p.err;
    } else {
      const std::vector<std::string> said = Matches(p.err, R"(stored as run ([0-9a-f]+)\n)");
      ASSERT_EQ(said.size(), 1u) << p.err;
      id = said[0];
    }
    EXPECT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{32}"))) << id;
    ids.push_back(id);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string row = WaitForRun(t.target(), ids[i]);
    ASSERT_FALSE(row.empty()) << ids[i];
    // One row per run: id, time, suite, results (2 workloads x 1 implementation), complete.
    EXPECT_NE(row.find("run_ids_small"), std::string::npos) << row;
    EXPECT_TRUE(std::regex_search(row, std::regex(R"(\s2\s+yes\s)"))) << row;
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(ids[i], ids[j]);
  }
  // The JSON form of --runs: one entry per bench above, results counted.
  const nlohmann::json runs =
      nlohmann::json::parse(Cli(t.target(), {"history", "--runs", "--json"}).out, nullptr, false);
  ASSERT_TRUE(runs.contains("runs")) << runs.dump();
  EXPECT_EQ(runs["runs"].size(), ids.size()) << runs.dump();
}

TEST(RunIds, ResultIdsSortNaturallyAndThePrintedTimeIsAcceptedBack) {
  const std::string dir = TempDir("run-ids-natural");
  TestServer t = StartServer();
  const std::string suite = SuiteFile(dir, "run_ids_eleven", 11, 32);
  const Process p =
      RunCli(dir, {"--target", t.target(), "bench", "--suite-file", suite, "--device", "cpu",
                   "--impl", "cpu_fused", "--warmup", "0", "--repetitions", "2"});
  ASSERT_EQ(p.rc, 0) << p.err;
  const std::vector<std::string> said = Matches(p.err, R"(stored as run ([0-9a-f]{32}))");
  ASSERT_EQ(said.size(), 1u) << p.err;
  const std::string run = said[0];
  ASSERT_FALSE(WaitForRun(t.target(), run).empty());

  // By an 8-character prefix; RUN/2 before RUN/10.
  const CliResult history = Cli(t.target(), {"history", "--run", run.substr(0, 8)});
  ASSERT_EQ(history.rc, 0) << history.err;
  const std::vector<std::string> indices = Matches(history.out, run + R"(/(\d+))");
  std::vector<std::string> expected;
  for (int i = 0; i <= 10; ++i) expected.push_back(std::to_string(i));
  EXPECT_EQ(indices, expected) << history.out;

  // The time column, given back to --since, finds the run; a second later it does not.
  const std::vector<std::string> times =
      Matches(history.out, R"((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d))");
  ASSERT_FALSE(times.empty()) << history.out;
  const CliResult since = Cli(t.target(), {"history", "--runs", "--since", times[0]});
  ASSERT_EQ(since.rc, 0) << since.err;
  EXPECT_FALSE(RunRow(since.out, run).empty()) << since.out;
  absl::Time printed_time;
  std::string error;
  ASSERT_TRUE(
      absl::ParseTime("%Y-%m-%d %H:%M:%S", times[0], absl::UTCTimeZone(), &printed_time, &error))
      << error;
  const std::int64_t printed = absl::ToUnixSeconds(printed_time);
  const CliResult later =
      Cli(t.target(), {"history", "--runs", "--since", std::to_string(printed + 1)});
  EXPECT_TRUE(RunRow(later.out, run).empty()) << later.out;
}

// Two stored runs whose ids share 12 characters: a prefix of 8 is ambiguous (the error lists
// both), one of 13 picks one, for history, compare and a result id alike.
TEST(RunIds, AmbiguousPrefixIsRefusedListingTheCandidates) {
  const std::string dir = TempDir("run-ids-prefix");
  const std::string a = "0123456789ab0000000000000000000a";
  const std::string b = "0123456789ab1111111111111111111b";
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    for (const std::string& id : {a, b}) {
      v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02, 50);
      report.set_run_id(id);
      const absl::StatusOr<std::string> stored = (*store)->RecordNow(report, 1000);
      ASSERT_TRUE(stored.ok()) << stored.status();
      EXPECT_EQ(*stored, id);
    }
  }
  server::ServerOptions options = LoopbackOptions();
  options.submissions.data_dir = dir;
  TestServer t = StartServer(options);

  const CliResult ambiguous = Cli(t.target(), {"history", "--run", "01234567"});
  EXPECT_NE(ambiguous.rc, 0);
  EXPECT_NE(ambiguous.err.find("INVALID_ARGUMENT"), std::string::npos) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find("run_id"), std::string::npos) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find(a), std::string::npos) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find(b), std::string::npos) << ambiguous.err;

  const CliResult unique = Cli(t.target(), {"history", "--run", "0123456789ab1"});
  ASSERT_EQ(unique.rc, 0) << unique.err;
  EXPECT_NE(unique.out.find(b + "/0"), std::string::npos) << unique.out;
  EXPECT_EQ(unique.out.find(a), std::string::npos) << unique.out;

  const CliResult compare =
      Cli(t.target(), {"compare", "0123456789ab0", "0123456789ab1", "--json"});
  EXPECT_EQ(compare.rc, 0) << compare.err;
  const CliResult compare_ambiguous = Cli(t.target(), {"compare", "0123456789", b});
  EXPECT_NE(compare_ambiguous.rc, 0);
  EXPECT_NE(compare_ambiguous.err.find("baseline_run"), std::string::npos) << compare_ambiguous.err;

  // device_model filters match literally: '_' and '%' are no wildcards (both runs are on an
  // "NVIDIA H200").
  const auto listed = [&](const std::string& gpu) {
    const CliResult r = Cli(t.target(), {"history", "--runs", "--gpu", gpu});
    EXPECT_EQ(r.rc, 0) << r.err;
    return !RunRow(r.out, a).empty();
  };
  EXPECT_TRUE(listed("H200"));
  EXPECT_FALSE(listed("H_00"));
  EXPECT_FALSE(listed("%"));
  EXPECT_FALSE(listed("NVIDIA%H200"));
}

// An unknown suite is an error with a suggestion, not an empty table and exit 0.
TEST(RunIds, UnknownSuiteInHistoryAndLeaderboardIsNotFound) {
  TestServer t = StartServer();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"history", "--suite", "fused_add_rmsnorm_h2047"},
        std::vector<std::string>{"leaderboard", "--suite", "fused_add_rmsnorm_h2047"}}) {
    SCOPED_TRACE(args[0]);
    const CliResult r = Cli(t.target(), args);
    EXPECT_EQ(r.rc, client::cli::kExitInfrastructure) << r.out;
    EXPECT_NE(r.err.find("NOT_FOUND"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("did you mean 'fused_add_rmsnorm_h2048'?"), std::string::npos) << r.err;
  }
  // A served suite without runs yet is an empty table, as it truly is.
  const CliResult served = Cli(t.target(), {"leaderboard", "--suite", "fused_add_rmsnorm_h2048"});
  EXPECT_EQ(served.rc, 0) << served.err;
}

// A bench of the real CLI, interrupted: stdout to `out`, stderr a pipe read as it comes,
// SIGINT once `interrupt_now(stderr so far)` says so.
struct InterruptedBench {
  std::string err;
  int status = 0;
  bool signalled = false;
  bool exited = false;
  std::chrono::steady_clock::time_point signalled_at;
};

InterruptedBench BenchAndInterrupt(const std::vector<std::string>& args, const std::string& out,
                                   const std::function<bool(const std::string&)>& interrupt_now) {
  InterruptedBench r;
  int err_pipe[2];
  // Close-on-exec: no process the in-process server starts keeps the pipe open.
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return r;
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(KERNELEVAL_CLI_BINARY));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(err_pipe[1], 2);
    execv(KERNELEVAL_CLI_BINARY, argv.data());
    _exit(127);
  }
  close(err_pipe[1]);
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!r.exited && std::chrono::steady_clock::now() < deadline) {
    pollfd p{err_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      const ssize_t n = read(err_pipe[0], buffer, sizeof(buffer));
      if (n > 0) r.err.append(buffer, n);
    }
    if (!r.signalled && interrupt_now(r.err) && kill(pid, SIGINT) == 0) {
      r.signalled = true;
      r.signalled_at = std::chrono::steady_clock::now();
    }
    r.exited = waitpid(pid, &r.status, WNOHANG) == pid;
  }
  if (!r.exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &r.status, 0);
  }
  for (ssize_t n; (n = read(err_pipe[0], buffer, sizeof(buffer))) > 0;) r.err.append(buffer, n);
  close(err_pipe[0]);
  return r;
}

// The CLI took the signal and ended with 130, the shell's code for SIGINT.
void ExpectEndedBySigint(const InterruptedBench& b) {
  ASSERT_TRUE(b.signalled) << b.err;
  ASSERT_TRUE(b.exited) << b.err;
  ASSERT_TRUE(WIFEXITED(b.status)) << b.err;
  EXPECT_EQ(WEXITSTATUS(b.status), 130) << b.err;
}

// Ctrl-C: SIGINT to the real binary mid-bench.
TEST(RunIds, CtrlCCancelsPrintsThePartialRunAndExits130) {
  const std::string dir = TempDir("run-ids-sigint");
  TestServer t = StartServer();
  // 40 workloads of 100 timed calls: seconds each, far longer than the wait for the first
  // progress line and the cancellation.
  const std::string suite = SuiteFile(dir, "run_ids_long", 40, 4096);
  const std::string out = dir + "/stdout";
  const InterruptedBench bench = BenchAndInterrupt(
      {"--target", t.target(), "bench", "--suite-file", suite, "--device", "cpu", "--impl",
       "cpu_fused", "--warmup", "0", "--repetitions", "100"},
      out, [](const std::string& err) {
        // After the first workload's line: its result is what the partial report must show.
        const std::size_t first = err.find("[1/40]");
        return first != std::string::npos && err.find('\n', first) != std::string::npos;
      });
  const std::string& err = bench.err;
  ASSERT_NO_FATAL_FAILURE(ExpectEndedBySigint(bench));
  // Cancelled, not run to the end: 39 workloads more would take minutes.
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - bench.signalled_at).count(),
      20.0);
  EXPECT_NE(err.find("interrupted: cancelled the benchmark after 1 result"), std::string::npos)
      << err;
  const std::vector<std::string> said = Matches(err, R"(partial run stored as run ([0-9a-f]{32}))");
  ASSERT_EQ(said.size(), 1u) << err;
  // The partial report on stdout holds the first workload.
  const std::string printed = ReadFile(out);
  EXPECT_NE(printed.find("batch_size=1"), std::string::npos) << printed;
  // The server kept the partial run under that id, marked incomplete: the first workload
  // measured, the rest skipped.
  const std::string row = WaitForRun(t.target(), said[0]);
  ASSERT_FALSE(row.empty()) << said[0];
  EXPECT_NE(row.find("NO (cut short)"), std::string::npos) << row;
  const CliResult results = Cli(t.target(), {"history", "--run", said[0], "--limit", "100"});
  ASSERT_EQ(results.rc, 0) << results.err;
  EXPECT_EQ(Matches(results.out, R"(/0 .* (passed) )").size(), 1u) << results.out;
  EXPECT_GE(Matches(results.out, R"( (skipped) )").size(), 30u) << results.out;
}

// Ctrl-C during the first workload: the started event, sent before any measurement, has
// named the run, so the CLI names the partial run although no workload finished, and the
// store keeps it under that id.
TEST(RunIds, CtrlCDuringTheFirstWorkloadStillNamesThePartialRun) {
  const std::string dir = TempDir("run-ids-sigint-first");
  TestServer t = StartServer();
  // Two workloads of 4096 timed calls on 4 MiB tensors: the first alone takes far longer
  // than the wait for the started line and the cancellation.
  const std::string suite = SuiteFile(dir, "run_ids_first", 2, 4096);
  const std::string out = dir + "/stdout";
  const InterruptedBench bench = BenchAndInterrupt(
      {"--target", t.target(), "bench", "--suite-file", suite, "--device", "cpu", "--impl",
       "cpu_fused", "--warmup", "0", "--repetitions", "4096", "--format", "json"},
      out, [](const std::string& err) {
        // The started line names the run before the first workload is measured.
        return !Matches(err, R"(benchmark run_ids_first: 2 workloads on cpu, run ([0-9a-f]{32})\n)")
                    .empty();
      });
  const std::string& err = bench.err;
  ASSERT_NO_FATAL_FAILURE(ExpectEndedBySigint(bench));
  EXPECT_NE(err.find("interrupted: cancelled the benchmark after 0 results"), std::string::npos)
      << err;
  const std::vector<std::string> started = Matches(err, R"(, run ([0-9a-f]{32})\n)");
  const std::vector<std::string> said = Matches(err, R"(partial run stored as run ([0-9a-f]{32}))");
  ASSERT_EQ(started.size(), 1u) << err;
  ASSERT_EQ(said.size(), 1u) << err;
  EXPECT_EQ(said[0], started[0]);
  // The JSON document on stdout names it too.
  const nlohmann::json doc = nlohmann::json::parse(ReadFile(out), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << ReadFile(out);
  EXPECT_EQ(doc.value("run_id", ""), said[0]);
  EXPECT_EQ(doc["complete"], false);
  // The store kept that run, cut short, with no workload measured to the end.
  const std::string row = WaitForRun(t.target(), said[0]);
  ASSERT_FALSE(row.empty()) << said[0];
  EXPECT_NE(row.find("run_ids_first"), std::string::npos) << row;
  EXPECT_NE(row.find("NO (cut short)"), std::string::npos) << row;
}

}  // namespace
}  // namespace kerneleval::testing
