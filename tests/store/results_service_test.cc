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
      EXPECT_EQ(r["receipt"]["seed"], 200);                   // uint64 as a JSON number
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
    // 1000 samples: enough for the ratio's interval (about +-0.2 %) to fit within the 1 %
    // threshold, so that independent draws of one distribution are called the same.
    const v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02, 1000);
    base = *(*store)->RecordNow(report, 1000);
    same = *(*store)->RecordNow(report, 2000);
    slow = *(*store)->RecordNow(Scaled(report, 1.05), 3000);
    noise = *(*store)->RecordNow(SyntheticReport(2, 10e-6, 0.02, 1000), 4000);
  }
  TestServer t = StartServer(StoreOptions(dir));
  const nlohmann::json slower =
      Json(Cli(t.target(), {"compare", base, slow, "--json", "--fail-on", "none"}));
  ASSERT_EQ(slower["comparisons"].size(), 2u) << slower.dump();
  EXPECT_EQ(slower["slower"], 2);
  for (const auto& c : slower["comparisons"]) {
    EXPECT_EQ(c["verdict"], "slower");
    EXPECT_NEAR(c["ratio"].get<double>(), 1.05, 1e-9);
    EXPECT_GT(c["ratio_ci_low"].get<double>(), 1.0);
    EXPECT_LT(c["p_value"].get<double>(), 0.001);
  }
  for (const std::string& candidate : {same, noise}) {
    const nlohmann::json unchanged =
        Json(Cli(t.target(), {"compare", base, candidate, "--json", "--fail-on", "none"}));
    EXPECT_EQ(unchanged["same"], 2) << unchanged.dump();
    EXPECT_EQ(unchanged.value("slower", 0), 0) << unchanged.dump();
  }
  // Windows: the implementation before and after t = 2500.
  const nlohmann::json windows = Json(
      Cli(t.target(), {"compare", "--impl", "fused", "--suite", "synthetic", "--baseline-since",
                       "1", "--baseline-until", "2500", "--candidate-since", "2500",
                       "--candidate-until", "3500", "--json", "--fail-on", "none"}));
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
  const nlohmann::json cmp =
      Json(Cli(t.target(), {"compare", older, newer, "--json", "--fail-on", "none"}));
  ASSERT_EQ(cmp["comparisons"].size(), 2u) << cmp.dump();
  for (const auto& c : cmp["comparisons"]) {
    EXPECT_EQ(c["baseline_samples"], 20);
    EXPECT_GT(c["ratio"].get<double>(), 0);
    EXPECT_NE(c["verdict"], "incomparable");
  }
  const std::string result_id = history["results"][0]["id"];
  const nlohmann::json again = Json(Cli(t.target(), {"reproduce", result_id, "--json"}));
  EXPECT_EQ(again["original"]["id"], result_id);
  EXPECT_EQ(again["reproduced"]["status"], "passed") << again.dump();
  EXPECT_EQ(again["reproduced"]["samples_seconds"].size(), 20u);
  EXPECT_EQ(again["comparison"]["candidate_samples"], 20);
  EXPECT_EQ(again["comparison"].value("incomparable_reason", ""), "") << again.dump();
  // The re-run went through Benchmark, so it is stored too, under a suite name of its own:
  // a one-workload re-run is not a run of the suite.
  ASSERT_EQ(WaitForResults(t.target(), "reproduce.store_small", 1), 1u);
  t.server->Shutdown(absl::Seconds(5));
  t.server.reset();
  TestServer u = StartServer(StoreOptions(dir));
  EXPECT_EQ(
      Json(Cli(u.target(), {"history", "--suite", "store_small", "--json"}))["results"].size(), 4u);
  EXPECT_EQ(
      Json(Cli(u.target(), {"history", "--suite", "reproduce.store_small", "--json"}))["results"]
          .size(),
      1u);
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
  EXPECT_EQ(rows.err.find("truncated"), std::string::npos) << rows.err;
  const CliResult cut = Cli(t.target(), {"export", "--format", "jsonl", "--limit", "1"});
  EXPECT_EQ(cut.rc, 0) << cut.err;
  EXPECT_EQ(std::count(cut.out.begin(), cut.out.end(), '\n'), 1);
  EXPECT_NE(cut.err.find("export: truncated: more results match than --limit 1"), std::string::npos)
      << cut.err;
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
  // Retention runs on its timer, not after each write: three runs until the pass.
  EXPECT_EQ((*store)->History(v1::HistoryRequest())->results_size(), 6);
  auto applied = (*store)->ApplyRetention(4000);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(*applied);  // SQLite: one server, always its turn
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

// The report as if its suite were `dtype` at hidden `hidden`, with the same workload names
// ("batch_size=3", "batch_size=17"): what a name-only match took for the same workload.
v1::BenchmarkReport WithProblem(v1::BenchmarkReport report, v1::DType dtype, int hidden) {
  report.mutable_definition()->set_dtype(dtype);
  for (v1::Axis& axis : *report.mutable_definition()->mutable_axes()) {
    if (axis.name() == "hidden_size") axis.set_value(hidden);
  }
  for (v1::WorkloadResult& r : *report.mutable_results())
    (*r.mutable_axes())["hidden_size"] = hidden;
  return report;
}

// The report with `samples` as every result's samples.
v1::BenchmarkReport WithSamples(v1::BenchmarkReport report, const std::vector<double>& samples) {
  for (v1::WorkloadResult& r : *report.mutable_results()) {
    r.clear_samples_seconds();
    for (double x : samples) r.add_samples_seconds(x);
    r.mutable_latency()->set_samples(static_cast<std::uint32_t>(samples.size()));
  }
  return report;
}

// The same kernel timed differently: a bf16 h2048 suite against fp32 h256 under the same
// workload names, a hot run against a cold one, an H100 against an H200. Each row is "not
// comparable" and says what differs; none gets a speed verdict.
TEST(ResultsStore, CompareRefusesResultsOfAnotherProblemProtocolOrDevice) {
  const std::string dir = TempDir("incomparable");
  std::string base, other_problem, hot, h100;
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02);
    base = *(*store)->RecordNow(report, 1000);
    // 10 % faster, and a bf16 problem 8x wider: once reported FASTER.
    other_problem =
        *(*store)->RecordNow(WithProblem(Scaled(report, 0.9), v1::DTYPE_BF16, 2048), 2000);
    v1::BenchmarkReport hot_report = Scaled(report, 0.9);
    hot_report.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
    hot = *(*store)->RecordNow(hot_report, 3000);
    v1::BenchmarkReport h100_report = Scaled(report, 0.9);
    h100_report.mutable_environments(0)->mutable_device()->set_model("NVIDIA H100 80GB HBM3");
    h100 = *(*store)->RecordNow(h100_report, 4000);
  }
  TestServer t = StartServer(StoreOptions(dir));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {other_problem, {"dtype fp32 vs bf16", "hidden 256 vs 2048"}},
      {hot, {"cache cold vs hot"}},
      {h100, {"device model NVIDIA H200 vs NVIDIA H100 80GB HBM3"}}};
  for (const auto& [candidate, differences] : cases) {
    const nlohmann::json cmp =
        Json(Cli(t.target(), {"compare", base, candidate, "--json", "--fail-on", "none"}));
    ASSERT_EQ(cmp["comparisons"].size(), 2u) << cmp.dump();
    EXPECT_EQ(cmp["incomparable"], 2) << cmp.dump();
    EXPECT_EQ(cmp.value("faster", 0), 0) << cmp.dump();
    for (const auto& c : cmp["comparisons"]) {
      EXPECT_EQ(c["verdict"], "incomparable");
      const std::string reason = c.value("incomparable_reason", "");
      for (const std::string& d : differences) {
        EXPECT_NE(reason.find(d), std::string::npos) << reason;
      }
    }
  }
  // Not comparable fails a gate by default; --fail-on none only prints.
  const CliResult table = Cli(t.target(), {"compare", base, other_problem});
  EXPECT_EQ(table.rc, client::kExitRegression) << table.err;
  EXPECT_EQ(Cli(t.target(), {"compare", base, other_problem, "--fail-on", "none"}).rc, 0);
  EXPECT_NE(table.out.find("not comparable: dtype fp32 vs bf16"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("FASTER"), std::string::npos) << table.out;
  const CliResult strict =
      Cli(t.target(), {"compare", base, other_problem, "--fail-on", "slower,incomparable"});
  EXPECT_EQ(strict.rc, 1) << strict.err;
  EXPECT_NE(strict.err.find("--fail-on incomparable: 2 comparisons not comparable"),
            std::string::npos)
      << strict.err;
  std::filesystem::remove_all(dir);
}

// What a CI job needs: each side's n and spread, "inconclusive" where the data cannot tell
// (a 21 % change on 4 noisy samples, once called "same"), and an exit code that fails the job
// on a slowdown.
TEST(ResultsStore, CompareShowsSpreadSaysInconclusiveAndFailsOnSlower) {
  const std::string dir = TempDir("verdicts");
  std::string base, slow, few_base, few_cand;
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02);
    base = *(*store)->RecordNow(report, 1000);
    slow = *(*store)->RecordNow(Scaled(report, 1.05), 2000);
    // Four samples a side whose medians are 21 % apart but overlap (Mann-Whitney p = 0.11).
    few_base = *(*store)->RecordNow(WithSamples(report, {10e-6, 12e-6, 9e-6, 11.5e-6}), 3000);
    few_cand =
        *(*store)->RecordNow(WithSamples(report, {13.5e-6, 14.5e-6, 10.5e-6, 12.5e-6}), 4000);
  }
  TestServer t = StartServer(StoreOptions(dir));
  const nlohmann::json slower =
      Json(Cli(t.target(), {"compare", base, slow, "--json", "--fail-on", "none"}));
  for (const auto& c : slower["comparisons"]) {
    EXPECT_EQ(c["baseline_samples"], 100);
    EXPECT_EQ(c["candidate_samples"], 100);
    // Log-normal at sigma 0.02: IQR = 2 * 0.6745 * 0.02 of the median, about 2.7 %.
    EXPECT_NEAR(
        c["baseline_iqr_seconds"].get<double>() / c["baseline_median_seconds"].get<double>(), 0.027,
        0.008);
    EXPECT_NEAR(c["candidate_iqr_seconds"].get<double>() / c["baseline_iqr_seconds"].get<double>(),
                1.05, 1e-9);
    // The threshold used is the larger of t and the noise (k = 1 x the larger relative IQR,
    // the candidate's here: 1.05 x the baseline's IQR over 1.05 x its median).
    const double noise = c["noise"].get<double>();
    EXPECT_NEAR(noise, 0.027, 0.008);
    EXPECT_DOUBLE_EQ(c["threshold"].get<double>(), std::max(0.01, noise));
  }
  const CliResult table = Cli(t.target(), {"compare", base, slow});
  EXPECT_NE(table.out.find("IQR"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" 100 "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2 slower"), std::string::npos) << table.out;

  const CliResult failed = Cli(t.target(), {"compare", base, slow, "--fail-on", "slower"});
  EXPECT_EQ(failed.rc, 1);
  EXPECT_NE(failed.err.find("--fail-on slower: 2 comparisons slower"), std::string::npos)
      << failed.err;
  EXPECT_NE(failed.out.find("SLOWER"), std::string::npos) << failed.out;  // the table still
  EXPECT_EQ(Cli(t.target(), {"compare", slow, base, "--fail-on", "slower"}).rc, 0);  // faster
  EXPECT_EQ(Cli(t.target(), {"compare", base, slow, "--fail-on", "slower", "--json"}).rc, 1);

  const nlohmann::json few =
      Json(Cli(t.target(), {"compare", few_base, few_cand, "--json", "--fail-on", "none"}));
  ASSERT_EQ(few["comparisons"].size(), 2u) << few.dump();
  EXPECT_EQ(few["inconclusive"], 2) << few.dump();
  EXPECT_EQ(few.value("same", 0), 0) << few.dump();
  for (const auto& c : few["comparisons"]) {
    EXPECT_EQ(c["verdict"], "inconclusive");
    EXPECT_EQ(c["baseline_samples"], 4);
  }
  EXPECT_EQ(Cli(t.target(), {"compare", few_base, few_cand, "--fail-on", "slower"}).rc, 0);
  const CliResult unsure =
      Cli(t.target(), {"compare", few_base, few_cand, "--fail-on", "slower,inconclusive"});
  EXPECT_EQ(unsure.rc, 1);
  EXPECT_NE(unsure.out.find("2 inconclusive"), std::string::npos) << unsure.out;
  const CliResult bad = Cli(t.target(), {"compare", base, slow, "--fail-on", "faster"});
  EXPECT_EQ(bad.rc, client::cli::kExitUsage);
  std::filesystem::remove_all(dir);
}

// A built-in suite names no workload: results carry the generated name ("batch_size=79").
// Reproduce finds it by that name, re-runs that one workload and compares.
TEST(ResultsStore, ReproducesAResultOfTheBuiltInSuite) {
  const std::string dir = TempDir("reproduce-builtin");
  TestServer t = StartServer(StoreOptions(dir));
  v1::BenchmarkRequest request;
  request.set_suite("fused_add_rmsnorm_h2048");
  request.add_implementations("cpu_fused");
  request.mutable_protocol()->set_warmup(1);
  request.mutable_protocol()->set_repetitions(5);
  v1::BenchmarkReport report;
  ASSERT_TRUE(t.client
                  ->Benchmark(request,
                              [&](const v1::BenchmarkEvent& e) {
                                if (e.has_report()) report = e.report();
                              })
                  .ok());
  ASSERT_EQ(report.results_size(), 7);
  ASSERT_EQ(WaitForResults(t.target(), "fused_add_rmsnorm_h2048", 7), 7u);
  const nlohmann::json stored =
      Json(Cli(t.target(), {"history", "--suite", "fused_add_rmsnorm_h2048", "--workload",
                            "batch_size=79", "--json"}));
  ASSERT_EQ(stored["results"].size(), 1u) << stored.dump();
  const std::string id = stored["results"][0]["id"];
  const nlohmann::json again = Json(Cli(t.target(), {"reproduce", id, "--json"}));
  EXPECT_EQ(again["original"]["id"], id);
  EXPECT_EQ(again["reproduced"]["workload"], "batch_size=79") << again.dump();
  EXPECT_EQ(again["reproduced"]["axes"]["batch_size"], 79);  // int64 as a JSON number
  EXPECT_EQ(again["reproduced"]["status"], "passed") << again.dump();
  EXPECT_EQ(again["reproduced"]["samples_seconds"].size(), 5u);
  EXPECT_EQ(again["comparison"]["candidate_samples"], 5);
  EXPECT_EQ(again["comparison"].value("incomparable_reason", ""), "") << again.dump();
  const CliResult printed = Cli(t.target(), {"reproduce", id});
  EXPECT_EQ(printed.rc, 0) << printed.err;
  EXPECT_NE(printed.out.find("reproduced " + id), std::string::npos) << printed.out;
  std::filesystem::remove_all(dir);
}

// A plain suite file names no workload either; and a result whose name its definition no
// longer gives is found by its axes. Reproduced on this CPU, an H200 result is not comparable.
TEST(ResultsStore, ReproducesUnnamedWorkloadsAndFindsThemByAxes) {
  const std::string dir = TempDir("reproduce-unnamed");
  std::string renamed;
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02, 10);
    report.mutable_protocol()->set_warmup(1);
    for (v1::WorkloadResult& r : *report.mutable_results()) {
      r.set_workload("old_" + r.workload());
      r.set_implementation("cpu_fused");  // what this server can re-run
    }
    renamed = *(*store)->RecordNow(report, 1000);
  }
  TestServer t = StartServer(StoreOptions(dir));
  v1::BenchmarkRequest request;
  *request.mutable_custom_suite() = SmallSuite("unnamed_workloads");
  for (v1::Workload& w : *request.mutable_custom_suite()->mutable_workloads()) w.clear_name();
  request.add_implementations("cpu_fused");
  request.mutable_protocol()->set_warmup(1);
  request.mutable_protocol()->set_repetitions(5);
  ASSERT_TRUE(t.client->Benchmark(request, [](const v1::BenchmarkEvent&) {}).ok());
  ASSERT_EQ(WaitForResults(t.target(), "unnamed_workloads", 2), 2u);
  const nlohmann::json stored =
      Json(Cli(t.target(), {"history", "--suite", "unnamed_workloads", "--json"}));
  for (const auto& r : stored["results"]) {
    const nlohmann::json again = Json(Cli(t.target(), {"reproduce", r["id"], "--json"}));
    EXPECT_EQ(again["reproduced"]["workload"], r["result"]["workload"]) << again.dump();
    EXPECT_EQ(again["reproduced"]["status"], "passed") << again.dump();
  }
  const nlohmann::json by_axes = Json(Cli(t.target(), {"reproduce", renamed + "/1", "--json"}));
  EXPECT_EQ(by_axes["original"]["result"]["workload"], "old_batch_size=17") << by_axes.dump();
  EXPECT_EQ(by_axes["reproduced"]["axes"]["batch_size"], 17) << by_axes.dump();
  EXPECT_EQ(by_axes["comparison"]["verdict"], "incomparable");
  EXPECT_NE(by_axes["comparison"]["incomparable_reason"].get<std::string>().find(
                "device model NVIDIA H200 vs"),
            std::string::npos)
      << by_axes.dump();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerneleval::testing
