// The verdict queue across a fleet: real kerneleval-server processes (CPU devices) on one real
// PostgreSQL (with_postgres.sh; skipped without it), driven by the real `kerneleval` binary.
// A benchmark queued through one server is run by another and watched through a third; a
// server SIGKILLed mid-job leaves it to another once its lease runs out, the results stored
// once; a server SIGTERMed mid-job gives it back at once (no attempt spent); a queued job
// cancelled through any server never runs.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "server/store/database.h"
#include "server_process.h"

namespace kerneleval::testing {
namespace {

using json = nlohmann::json;

// A job long enough on a CPU (several seconds) to be caught running, and short enough for CI.
constexpr int kLongWorkloads = 6;
constexpr int kLongHidden = 32768;
constexpr char kLongRepetitions[] = "40";
constexpr char kLease[] = "3";

class QueueFleet : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
    if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
    url_ = url;
    // Every test starts from an empty queue: no job of an earlier test is left to claim.
    auto db = server::store::OpenPostgres(url_);
    ASSERT_TRUE(db.ok()) << db.status();
    (void)(*db)->Query("DELETE FROM jobs");  // absent before the first server migrates
    (void)(*db)->Query("DELETE FROM job_owners");
    dir_ = fs::temp_directory_path() /
           ("kerneleval-queue-fleet-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    long_suite_ = SuiteFile(dir_.string(), "long", kLongWorkloads, kLongHidden);
    short_suite_ = SuiteFile(dir_.string(), "short", 2, 1024);
  }
  void TearDown() override {
    servers_.clear();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A server named `name` on the shared database; `workers` jobs at once (0: a front only),
  // each claim under a lease of `lease` seconds.
  ServerProcess* Start(const std::string& name, const std::string& workers = "-1",
                       const std::string& lease = kLease,
                       const std::vector<std::string>& extra = {}) {
    const fs::path port_file = dir_ / (name + ".port");
    std::vector<std::string> args = FleetServerArgs(dir_, name);
    args.insert(args.end(), {"--results-db", url_, "--queue-workers", workers,
                             "--queue-lease-seconds", lease, "--queue-poll-seconds", "0.2"});
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<ServerProcess>(dir_, name, args);
    const int port = WaitForPort(p.get(), port_file);
    EXPECT_GT(port, 0) << p->err();
    targets_[name] = "127.0.0.1:" + std::to_string(port);
    servers_[name] = std::move(p);
    return servers_[name].get();
  }

  Process Cli(const std::string& server, std::vector<std::string> args) {
    args.insert(args.begin(), {"--target", targets_.at(server), "--deadline", "300"});
    return RunCli(dir_.string(), args);
  }

  // Queues `suite_file` through `server` (for the servers `runs_on` names, where given); the
  // run id.
  std::string Enqueue(const std::string& server, const std::string& suite_file,
                      const std::string& repetitions, const std::string& runs_on = "") {
    std::vector<std::string> args = {"bench",     "--suite-file", suite_file,
                                     "--impl",    "cpu_fused",    "--repetitions",
                                     repetitions, "--detach",     "--json"};
    if (!runs_on.empty()) args.insert(args.end(), {"--runs-on", runs_on});
    const Process p = Cli(server, args);
    EXPECT_EQ(p.rc, 0) << p.err;
    const json job = json::parse(p.out, nullptr, false);
    EXPECT_FALSE(job.is_discarded()) << p.out;
    EXPECT_EQ(job.value("state", ""), "queued") << p.out;
    return job.value("run_id", "");
  }

  // The job as `server` lists it (its owner's list).
  json Job(const std::string& server, const std::string& run_id) {
    const Process p = Cli(server, {"queue", "--json"});
    EXPECT_EQ(p.rc, 0) << p.err;
    const json list = json::parse(p.out, nullptr, false);
    if (list.is_discarded() || !list.contains("jobs")) return json();
    for (const json& job : list["jobs"]) {
      if (job.value("run_id", "") == run_id) return job;
    }
    return json();
  }

  // Waits until the job runs; the server process that runs it (by the pid in its worker name).
  std::string WaitUntilRunning(const std::string& server, const std::string& run_id) {
    for (int i = 0; i < 600; ++i) {
      const json job = Job(server, run_id);
      if (job.value("state", "") == "running") {
        const std::string worker = job.value("worker", "");
        for (const auto& [name, process] : servers_) {
          if (worker.find(":" + std::to_string(process->pid()) + ":") != std::string::npos) {
            return name;
          }
        }
        ADD_FAILURE() << "no server here runs it: " << worker;
        return "";
      }
      EXPECT_EQ(job.value("state", "queued"), "queued") << job.dump();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "job " << run_id << " never ran";
    return "";
  }

  // The stored results of `run_id`, as `server` sees them.
  int StoredResults(const std::string& server, const std::string& run_id) {
    const Process p = Cli(server, {"history", "--runs", "--run", run_id, "--json"});
    EXPECT_EQ(p.rc, 0) << p.err;
    const json history = json::parse(p.out, nullptr, false);
    if (history.is_discarded() || !history.contains("runs") || history["runs"].size() != 1) {
      ADD_FAILURE() << p.out;
      return -1;
    }
    return history["runs"][0].value("results", -1);
  }

  std::string url_;
  fs::path dir_;
  std::string long_suite_, short_suite_;
  std::map<std::string, std::unique_ptr<ServerProcess>> servers_;
  std::map<std::string, std::string> targets_;
};

TEST_F(QueueFleet, QueuedThroughOneServerRunByAnotherWatchedThroughAThird) {
  Start("front", "0");
  Start("worker");
  Start("watcher", "0");
  const std::string id = Enqueue("front", short_suite_, "5");
  ASSERT_FALSE(id.empty());

  const Process watched = Cli("watcher", {"watch", id.substr(0, 10)});
  EXPECT_EQ(watched.rc, 0) << watched.out << watched.err;
  EXPECT_NE(watched.out.find("run " + id + ": done"), std::string::npos) << watched.out;
  const json job = Job("front", id);
  EXPECT_EQ(job.value("state", ""), "done") << job.dump();
  EXPECT_EQ(job.value("attempts", 0), 1);
  EXPECT_NE(job.value("worker", "").find(std::to_string(servers_["worker"]->pid())),
            std::string::npos)
      << job.dump();
  EXPECT_EQ(StoredResults("watcher", id), 2);
}

// A plain Benchmark call through a server that runs nothing itself (--queue-benchmarks,
// --queue-workers 0): the stream follows the job to the server that claims it and gives the
// client the report as a local run would, under the run id it announced first.
TEST_F(QueueFleet, ABenchmarkThroughAFrontFollowsItsJobToTheServerThatRunsIt) {
  Start("front", "0", kLease, {"--queue-benchmarks"});
  Start("worker");
  const Process bench = Cli("front", {"bench", "--suite-file", short_suite_, "--impl", "cpu_fused",
                                      "--repetitions", "5", "--format", "json"});
  ASSERT_EQ(bench.rc, 0) << bench.out << bench.err;
  const json report = json::parse(bench.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << bench.out;
  const std::string id = report.value("run_id", "");
  ASSERT_FALSE(id.empty()) << bench.out;
  ASSERT_EQ(report["results"].size(), 2u) << bench.out;
  for (const json& r : report["results"]) {
    EXPECT_EQ(r.value("status", ""), "passed") << r.dump();
    EXPECT_EQ(r["latency"].value("samples", 0), 5) << r.dump();
    EXPECT_EQ(r["samples_seconds"].size(), 5u) << "the samples travel with the stored run";
  }
  const json job = Job("front", id);
  EXPECT_EQ(job.value("state", ""), "done") << job.dump();
  EXPECT_NE(job.value("worker", "").find(std::to_string(servers_["worker"]->pid())),
            std::string::npos)
      << job.dump();
  EXPECT_EQ(StoredResults("front", id), 2);

  // A request that cannot run is refused at once, as a local Benchmark refuses it.
  const Process refused = Cli("front", {"bench", "--suite", "no_such_suite"});
  EXPECT_NE(refused.rc, 0);
  EXPECT_NE(refused.err.find("NOT_FOUND"), std::string::npos) << refused.err;
}

// A client that stops waiting (here its deadline) takes its job with it: cancelled, whether
// still queued or already running elsewhere.
TEST_F(QueueFleet, ABenchmarkStreamThatEndsCancelsItsJob) {
  Start("front", "0", kLease, {"--queue-benchmarks"});
  Start("worker");
  const Process bench =
      RunCli(dir_.string(), {"--target", targets_.at("front"), "--deadline", "2", "bench",
                             "--suite-file", long_suite_, "--impl", "cpu_fused", "--repetitions",
                             "500"});  // some 20 s of work: far past the deadline
  EXPECT_NE(bench.rc, 0) << bench.out;
  EXPECT_NE(bench.err.find("DEADLINE_EXCEEDED"), std::string::npos) << bench.err;
  std::string state;
  for (int i = 0; i < 300 && state != "cancelled"; ++i) {
    const Process p = Cli("front", {"queue", "--json"});
    const json list = json::parse(p.out, nullptr, false);
    ASSERT_FALSE(list.is_discarded()) << p.out;
    ASSERT_EQ(list["jobs"].size(), 1u) << p.out;
    state = list["jobs"][0].value("state", "");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state, "cancelled");
}

TEST_F(QueueFleet, AServerKilledMidJobLeavesItToAnotherAndItsResultsAreStoredOnce) {
  Start("front", "0");
  Start("a");
  Start("b");
  const std::string id = Enqueue("front", long_suite_, kLongRepetitions);
  const std::string runner = WaitUntilRunning("front", id);
  ASSERT_FALSE(runner.empty());
  servers_[runner]->Signal(SIGKILL);
  servers_[runner]->Wait(std::chrono::seconds(60));
  ASSERT_FALSE(servers_[runner]->running());

  const Process watched = Cli("front", {"watch", id});
  EXPECT_EQ(watched.rc, 0) << watched.out << watched.err;
  const json job = Job("front", id);
  EXPECT_EQ(job.value("state", ""), "done") << job.dump();
  // At least the killed server's claim and the survivor's (a starved machine may let a short
  // lease run out once more); the results are stored once whatever the attempts.
  EXPECT_GE(job.value("attempts", 0), 2) << job.dump();
  const std::string survivor = runner == "a" ? "b" : "a";
  EXPECT_NE(job.value("worker", "").find(std::to_string(servers_[survivor]->pid())),
            std::string::npos)
      << job.dump();
  EXPECT_EQ(StoredResults("front", id), kLongWorkloads);
}

TEST_F(QueueFleet, AServerStoppedMidJobGivesItBackAtOnce) {
  // A lease far longer than the job: only a release, never the lease running out (as it may
  // on a starved machine with a 3 s lease), lets the other server take the job.
  Start("front", "0", "600");
  Start("a", "-1", "600");
  Start("b", "-1", "600");
  const std::string id = Enqueue("front", long_suite_, kLongRepetitions);
  const std::string runner = WaitUntilRunning("front", id);
  ASSERT_FALSE(runner.empty());
  servers_[runner]->Signal(SIGTERM);
  EXPECT_EQ(servers_[runner]->Wait(std::chrono::seconds(120)), 0) << servers_[runner]->err();

  const Process watched = Cli("front", {"watch", id});
  EXPECT_EQ(watched.rc, 0) << watched.out << watched.err;
  const json job = Job("front", id);
  EXPECT_EQ(job.value("state", ""), "done") << job.dump();
  // Released, not left to its lease: the attempt it spent was given back.
  EXPECT_EQ(job.value("attempts", 0), 1) << job.dump();
  EXPECT_EQ(StoredResults("front", id), kLongWorkloads);
}

TEST_F(QueueFleet, ACancelledQueuedJobNeverRunsAndAnUnknownOneIsNotFound) {
  Start("front", "0");  // no server runs jobs: the job stays queued
  const std::string id = Enqueue("front", short_suite_, "5");
  EXPECT_EQ(Job("front", id).value("position", 0), 1);
  Start("other", "0");
  const Process cancelled = Cli("other", {"cancel", id});
  EXPECT_EQ(cancelled.rc, 0) << cancelled.err;
  EXPECT_NE(cancelled.out.find("cancelled"), std::string::npos) << cancelled.out;
  const Process watched = Cli("front", {"watch", id});
  EXPECT_EQ(watched.rc, 4) << watched.out << watched.err;  // incomplete: cancelled
  const Process again = Cli("front", {"cancel", id});
  EXPECT_EQ(again.rc, 5);
  EXPECT_NE(again.err.find("FAILED_PRECONDITION"), std::string::npos) << again.err;
  const Process unknown = Cli("front", {"watch", "0123456789abcdef"});
  EXPECT_EQ(unknown.rc, 5);
  EXPECT_NE(unknown.err.find("NOT_FOUND"), std::string::npos) << unknown.err;
}

TEST_F(QueueFleet, AJobPinnedToANodeRunsThereAndOneForAnAbsentArchitectureWaits) {
  const long long started_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  Start("front", "0");
  Start("a");
  Start("b");
  // Pinned to b: a has room and polls as often, but never claims it.
  for (int i = 0; i < 3; ++i) {
    const std::string id = Enqueue("front", short_suite_, "5", "cpu@b");
    ASSERT_FALSE(id.empty());
    const Process watched = Cli("front", {"watch", id});
    EXPECT_EQ(watched.rc, 0) << watched.out << watched.err;
    const json job = Job("front", id);
    EXPECT_EQ(job.value("state", ""), "done") << job.dump();
    EXPECT_EQ(job.value("device_kind", ""), "cpu@b") << job.dump();
    EXPECT_NE(job.value("worker", "").find(":" + std::to_string(servers_["b"]->pid()) + ":"),
              std::string::npos)
        << job.dump();
  }
  // The device time those jobs held was charged to their owner: its place in the claim order
  // (job_owners.fair_at_us) moved from the empty default to past the floor of its charges
  // (an hour before each), all after the test started.
  {
    auto db = server::store::OpenPostgres(url_);
    ASSERT_TRUE(db.ok()) << db.status();
    auto rows = (*db)->Query("SELECT fair_at_us FROM job_owners WHERE owner = 'anonymous'");
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 1u);
    const long long fair_at = std::stoll(rows->front().at(0).value_or("0"));
    EXPECT_GT(fair_at, started_us - 3600LL * 1000000);
  }
  // For GPUs of compute capability 9.0: no server here has one, so it waits, first in line
  // among its kind, while a CPU job queued after it runs.
  const std::string waiting = Enqueue("front", short_suite_, "5", "cuda:sm_90");
  const std::string cpu = Enqueue("front", short_suite_, "5", "cpu");
  EXPECT_EQ(Cli("front", {"watch", cpu}).rc, 0);
  const json job = Job("front", waiting);
  EXPECT_EQ(job.value("state", ""), "queued") << job.dump();
  EXPECT_EQ(job.value("device_kind", ""), "cuda:sm_90") << job.dump();
  EXPECT_EQ(job.value("position", 0), 1) << job.dump();
  EXPECT_EQ(Cli("front", {"cancel", waiting}).rc, 0);
  // Refused at the door, naming the field.
  const Process bad =
      Cli("front", {"bench", "--suite-file", short_suite_, "--detach", "--runs-on", "cuda:90"});
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("INVALID_ARGUMENT"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("runs_on: 'cuda:90'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kerneleval::testing
