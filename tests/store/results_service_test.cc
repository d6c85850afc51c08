// The results store through a real server on loopback and the real CLI, on SQLite in a
// temporary --data-dir: history that survives a restart, comparisons that find a planted
// 5 % slowdown and nothing between identical runs, reproduce, export, retention, regression
// gauges and the errors of bad requests.
#include <nlohmann/json.hpp>

#include "kerneleval/v1/results.grpc.pb.h"
#include "server/store/result_store.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

server::ServerOptions StoreOptions(const std::string& dir) {
  server::ServerOptions o = LoopbackOptions();
  o.submissions.data_dir = dir;
  return o;
}

nlohmann::json Json(const CliResult& r) {
  EXPECT_EQ(r.rc, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(ResultsStore, HistorySurvivesARestart) {
  const std::string dir = TempDir("restart");
  std::vector<std::string> ids;
  {
    TestServer t = StartServer(StoreOptions(dir));
    const v1::BenchmarkReport report = Bench(t, {"cpu_fused", "cpu_unfused"});
    ASSERT_EQ(report.results_size(), 4);
    t.server->Shutdown(absl::Seconds(5));  // the writer drains its queue on the way down
    t.server.reset();
  }
  {
    TestServer t = StartServer(StoreOptions(dir));
    const nlohmann::json history =
        Json(Cli(t.target(), {"history", "--suite", "store_small", "--samples", "--json"}));
    ASSERT_EQ(history["results"].size(), 4u) << history.dump();
    for (const auto& r : history["results"]) {
      EXPECT_EQ(r["result"]["samples_seconds"].size(), 20u);  // the raw samples are kept
      EXPECT_EQ(r["receipt"]["seed"], "200");                 // uint64 as a JSON string
      EXPECT_EQ(r["receipt"]["suite_hash"].get<std::string>().size(), 64u);
      EXPECT_FALSE(r["environment"]["server_version"].get<std::string>().empty());
    }
    const CliResult table = Cli(t.target(), {"history", "--impl", "cpu_fused"});
    EXPECT_EQ(table.rc, 0) << table.err;
    EXPECT_NE(table.out.find("batch_size=17"), std::string::npos) << table.out;
    EXPECT_EQ(table.out.find("cpu_unfused"), std::string::npos) << table.out;

    const nlohmann::json board =
        Json(Cli(t.target(), {"leaderboard", "--suite", "store_small", "--json"}));
    ASSERT_EQ(board["entries"].size(), 2u) << board.dump();
    EXPECT_EQ(board["entries"][0]["rank"], 1);
    EXPECT_EQ(board["entries"][1]["rank"], 2);
    const CliResult printed = Cli(t.target(), {"leaderboard", "--suite", "store_small"});
    EXPECT_NE(printed.out.find("cpu_fused"), std::string::npos) << printed.out;
  }
  std::filesystem::remove_all(dir);
}

// Synthetic runs stored through the store's own write path, compared by the server: the
// samples are exactly what a test must control (a CPU shared with builds is not quiet
// enough to plant 5 % in real timings and promise significance).
TEST(ResultsStore, CompareCallsAPlantedFivePercentSlowdownAndNotIdenticalRuns) {
  const std::string dir = TempDir("compare");
  std::string base, same, slow, noise;
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02);
    base = *(*store)->RecordNow(report, 1000);
    same = *(*store)->RecordNow(report, 2000);
    slow = *(*store)->RecordNow(Scaled(report, 1.05), 3000);
    noise = *(*store)->RecordNow(SyntheticReport(2, 10e-6, 0.02), 4000);
  }
  TestServer t = StartServer(StoreOptions(dir));
  const nlohmann::json slower = Json(Cli(t.target(), {"compare", base, slow, "--json"}));
  ASSERT_EQ(slower["comparisons"].size(), 2u) << slower.dump();
  EXPECT_EQ(slower["slower"], 2);
  for (const auto& c : slower["comparisons"]) {
    EXPECT_EQ(c["verdict"], "VERDICT_SLOWER");
    EXPECT_NEAR(c["ratio"].get<double>(), 1.05, 1e-9);
    EXPECT_GT(c["ratio_ci_low"].get<double>(), 1.0);
    EXPECT_LT(c["p_value"].get<double>(), 0.001);
  }
  for (const std::string& candidate : {same, noise}) {
    const nlohmann::json unchanged = Json(Cli(t.target(), {"compare", base, candidate, "--json"}));
    EXPECT_EQ(unchanged["same"], 2) << unchanged.dump();
    EXPECT_EQ(unchanged.value("slower", 0), 0) << unchanged.dump();
  }
  // Windows: the implementation before and after t = 2500.
  const nlohmann::json windows =
      Json(Cli(t.target(), {"compare", "--impl", "fused", "--suite", "synthetic",
                            "--baseline-since", "1", "--baseline-until", "2500",
                            "--candidate-since", "2500", "--candidate-until", "3500", "--json"}));
  EXPECT_EQ(windows["slower"], 2) << windows.dump();
  const CliResult table = Cli(t.target(), {"compare", base, slow});
  EXPECT_NE(table.out.find("SLOWER"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("+5.00%"), std::string::npos) << table.out;
  std::filesystem::remove_all(dir);
}

TEST(ResultsStore, RegressionDetectionSetsTheGauges) {
  const std::string dir = TempDir("regression");
  auto registry = std::make_shared<prometheus::Registry>();
  server::store::StoreOptions o;
  o.data_dir = dir;
  auto store = server::store::ResultStore::Open(o, registry);
  ASSERT_TRUE(store.ok()) << store.status();
  const v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02);
  ASSERT_TRUE((*store)->RecordNow(report, 1000).ok());
  ASSERT_TRUE((*store)->RecordNow(SyntheticReport(3, 10e-6, 0.02), 2000).ok());
  auto gauge = [&](const std::string& name) {
    for (const auto& family : registry->Collect()) {
      if (family.name != name) continue;
      for (const auto& m : family.metric) {
        for (const auto& l : m.label) {
          if (l.name == "workload" && l.value == "batch_size=17") return m.gauge.value;
        }
      }
    }
    return -1.0;
  };
  EXPECT_EQ(gauge("kerneleval_result_regression"), 0);
  ASSERT_TRUE((*store)->RecordNow(Scaled(report, 1.05), 3000).ok());
  EXPECT_EQ(gauge("kerneleval_result_regression"), 1);
  EXPECT_NEAR(gauge("kerneleval_result_baseline_ratio"), 1.05, 0.02);
  EXPECT_GT(gauge("kerneleval_result_baseline_confidence"), 0.999);
  // A correctness change is a regression whatever the timing says.
  v1::BenchmarkReport wrong = SyntheticReport(4, 10e-6, 0.02);
  for (auto& r : *wrong.mutable_results()) r.set_status(v1::RESULT_STATUS_INCORRECT);
  ASSERT_TRUE((*store)->RecordNow(wrong, 4000).ok());
  EXPECT_EQ(gauge("kerneleval_result_regression"), 1);
  store->reset();
  std::filesystem::remove_all(dir);
}

TEST(ResultsStore, RealRunsCompareAndReproduce) {
  const std::string dir = TempDir("real");
  TestServer t = StartServer(StoreOptions(dir));
  Bench(t, {"cpu_fused"});
  Bench(t, {"cpu_fused"});
  ASSERT_EQ(WaitForResults(t.target(), "store_small", 4), 4u);
  // The second run was compared with the first on arrival: one gauge series per workload.
  // Set just after the rows are committed: polled like the history.
  std::string scrape;
  double ratio = -1;
  for (int i = 0; i < 100 && ratio < 0; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    scrape = ScrapeMetrics(t.server->metrics_port());
    ratio = MetricValue(
        scrape, "kerneleval_result_baseline_ratio",
        {{"suite", "store_small"}, {"workload", "batch_size=17"}, {"implementation", "cpu_fused"}});
  }
  EXPECT_GT(ratio, 0) << scrape;
  EXPECT_GE(MetricValue(scrape, "kerneleval_result_regression",
                        {{"suite", "store_small"}, {"implementation", "cpu_fused"}}),
            0);
  const nlohmann::json history =
      Json(Cli(t.target(), {"history", "--suite", "store_small", "--json"}));
  ASSERT_EQ(history["results"].size(), 4u) << history.dump();
  // Newest first: the two runs' ids.
  const std::string newer = history["results"][0]["run_id"];
  const std::string older = history["results"][3]["run_id"];
  ASSERT_NE(newer, older);
  const nlohmann::json cmp = Json(Cli(t.target(), {"compare", older, newer, "--json"}));
  ASSERT_EQ(cmp["comparisons"].size(), 2u) << cmp.dump();
  for (const auto& c : cmp["comparisons"]) {
    EXPECT_EQ(c["baseline_samples"], 20);
    EXPECT_GT(c["ratio"].get<double>(), 0);
    EXPECT_NE(c["verdict"], "VERDICT_INCOMPARABLE");
  }
  const std::string result_id = history["results"][0]["id"];
  const nlohmann::json again = Json(Cli(t.target(), {"reproduce", result_id, "--json"}));
  EXPECT_EQ(again["original"]["id"], result_id);
  EXPECT_EQ(again["reproduced"]["status"], "RESULT_STATUS_PASSED") << again.dump();
  EXPECT_EQ(again["reproduced"]["samples_seconds"].size(), 20u);
  EXPECT_EQ(again["comparison"]["candidate_samples"], 20);
  ASSERT_EQ(WaitForResults(t.target(), "store_small", 5), 5u);
  // The re-run went through Benchmark, so it is stored too.
  t.server->Shutdown(absl::Seconds(5));
  t.server.reset();
  TestServer u = StartServer(StoreOptions(dir));
  const nlohmann::json after =
      Json(Cli(u.target(), {"history", "--suite", "store_small", "--json"}));
  EXPECT_EQ(after["results"].size(), 5u);
  std::filesystem::remove_all(dir);
}

TEST(ResultsStore, ExportRowsCsvAndTraces) {
  const std::string dir = TempDir("export");
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->RecordNow(SyntheticReport(1, 10e-6, 0.02), 1000).ok());
  }
  TestServer t = StartServer(StoreOptions(dir));
  const CliResult rows = Cli(t.target(), {"export", "--format", "jsonl"});
  ASSERT_EQ(rows.rc, 0) << rows.err;
  std::istringstream lines(rows.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto row = nlohmann::json::parse(line);
    EXPECT_EQ(row["device_model"], "NVIDIA H200");
    EXPECT_EQ(row["axis_batch_size"].is_number(), true);
    ++n;
  }
  EXPECT_EQ(n, 2);
  const CliResult csv = Cli(t.target(), {"export", "--format", "csv"});
  EXPECT_EQ(csv.out.rfind("result_id,run_id,", 0), 0u) << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 3);
  const CliResult trace = Cli(t.target(), {"export", "--format", "trace"});
  const auto first = nlohmann::json::parse(trace.out.substr(0, trace.out.find('\n')));
  EXPECT_EQ(first["definition"], "synthetic");
  EXPECT_EQ(first["evaluation"]["status"], "PASSED");
  EXPECT_EQ(first["evaluation"]["environment"]["hardware"], "NVIDIA H200");
  std::filesystem::remove_all(dir);
}

TEST(ResultsStore, RetentionDeletesOldRunsAndDownsamplesSamples) {
  const std::string dir = TempDir("retention");
  server::store::StoreOptions o;
  o.data_dir = dir;
  o.max_runs = 2;
  o.raw_sample_runs = 1;
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE((*store)->RecordNow(SyntheticReport(i, 10e-6, 0.02), 1000 * i).ok());
  }
  v1::HistoryRequest request;
  request.set_include_samples(true);
  auto history = (*store)->History(request);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->results_size(), 4);  // two runs of two results
  EXPECT_EQ(history->results(0).created_unix_seconds(), 3000);
  EXPECT_FALSE(history->results(0).downsampled());
  EXPECT_EQ(history->results(0).result().samples_seconds_size(), 100);
  EXPECT_EQ(history->results(3).created_unix_seconds(), 2000);
  EXPECT_TRUE(history->results(3).downsampled());
  EXPECT_EQ(history->results(3).result().samples_seconds_size(), 0);
  EXPECT_EQ(history->results(3).quantiles_seconds_size(), 21);
  // Paging: one result a page, a token to the next.
  request.set_page_size(1);
  auto page = (*store)->History(request);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->results_size(), 1);
  EXPECT_EQ(page->next_page_token(), "1");
  store->reset();
  std::filesystem::remove_all(dir);
}

TEST(ResultsStore, BadRequestsNameTheirField) {
  TestServer t = StartServer(StoreOptions(TempDir("bad")));
  auto stub =
      v1::Results::NewStub(grpc::CreateChannel(t.target(), grpc::InsecureChannelCredentials()));
  auto call = [&](auto method, const auto& request, auto* response) {
    grpc::ClientContext context;
    return (stub.get()->*method)(&context, request, response);
  };
  v1::LeaderboardResponse board;
  grpc::Status s = call(&v1::Results::Stub::Leaderboard, v1::LeaderboardRequest(), &board);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("suite:", 0), 0u) << s.error_message();

  v1::CompareRequest compare;
  compare.set_baseline_run("a");
  v1::CompareResponse compared;
  s = call(&v1::Results::Stub::Compare, compare, &compared);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("candidate_run:", 0), 0u) << s.error_message();
  compare.set_candidate_run("b");
  s = call(&v1::Results::Stub::Compare, compare, &compared);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();

  v1::ReproduceRequest reproduce;
  reproduce.set_result_id(std::string(200, 'x'));
  v1::ReproduceResponse reproduced;
  s = call(&v1::Results::Stub::Reproduce, reproduce, &reproduced);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message().rfind("result_id:", 0), 0u) << s.error_message();
  EXPECT_LT(s.error_message().size(), 200u);  // the echo is bounded

  v1::HistoryRequest history;
  history.set_page_size(5000);
  v1::HistoryResponse listed;
  s = call(&v1::Results::Stub::History, history, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("page_size:", 0), 0u) << s.error_message();
  history.set_page_size(10);
  history.mutable_filter()->set_since_unix_seconds(10);
  history.mutable_filter()->set_until_unix_seconds(5);
  s = call(&v1::Results::Stub::History, history, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("filter.until_unix_seconds:", 0), 0u) << s.error_message();
  history.clear_filter();
  history.set_page_token("not a token");
  s = call(&v1::Results::Stub::History, history, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("page_token:", 0), 0u) << s.error_message();

  const CliResult usage = Cli(t.target(), {"compare", "only-one"});
  EXPECT_EQ(usage.rc, client::cli::kExitUsage);
}

}  // namespace
}  // namespace kerneleval::testing
