// The peak each stored result's SOL % is against: kept with the result (migration 0003, and
// filled at start for results stored before it), a leaderboard that ranks by time when one
// device model's runs were measured against different peaks, compare saying the peaks
// differ, and regression gauges that keep the GPUs and protocols of one server apart.
// Synthetic reports through the store's own write path, read through a real server and the
// real CLI on SQLite; the same board on PostgreSQL is in results_postgres_test.cc.
#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"

#include "common/protocol.h"
#include "server/store/database.h"
#include "server/store/result_store.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

constexpr double kBytes = 1e5;  // per call, for SOL figures of the planted medians

server::ServerOptions StoreOptions(const std::string& dir) {
  server::ServerOptions o = LoopbackOptions();
  o.submissions.data_dir = dir;
  return o;
}

nlohmann::json Json(const CliResult& r) {
  EXPECT_EQ(r.rc, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// `report` as `implementation` measured against a copy peak of `peak` bytes per second, as a
// CPU server reports it (the peak measured when that server started).
v1::BenchmarkReport WithPeak(v1::BenchmarkReport report, const std::string& implementation,
                             double peak) {
  for (v1::WorkloadResult& r : *report.mutable_results()) {
    r.set_implementation(implementation);
    r.clear_sol();
    v1::SolFigure* sol = r.add_sol();
    sol->set_source(v1::PEAK_SOURCE_MEASURED_COPY);
    sol->set_peak_bytes_per_second(peak);
    sol->set_sol_seconds(kBytes / peak);
    sol->set_sol_ratio(kBytes / peak / r.latency().median_seconds());
  }
  return report;
}

// Two runs after a restart moved the peak: "fused" at 10 us against 9.29 GB/s (SOL 108 %),
// "unfused" faster at 9.5 us but against 12 GB/s (SOL 88 %). By SOL fused would lead.
std::pair<std::string, std::string> StoreTwoPeaks(const std::string& dir, double second_peak) {
  server::store::StoreOptions o;
  o.data_dir = dir;
  auto store = server::store::ResultStore::Open(o, nullptr);
  EXPECT_TRUE(store.ok()) << store.status();
  const std::string a =
      *(*store)->RecordNow(WithPeak(SyntheticReport(1, 10e-6, 0.02), "fused", 9.29e9), 1000);
  const std::string b = *(*store)->RecordNow(
      WithPeak(SyntheticReport(2, 9.5e-6, 0.02), "unfused", second_peak), 2000);
  return {a, b};
}

TEST(SolPeaks, LeaderboardRanksByTimeWhenAModelsPeaksDiffer) {
  const std::string dir = TempDir("peaks-differ");
  StoreTwoPeaks(dir, 12e9);
  TestServer t = StartServer(StoreOptions(dir));
  const nlohmann::json board =
      Json(Cli(t.target(), {"leaderboard", "--suite", "synthetic", "--json"}));
  ASSERT_EQ(board["entries"].size(), 2u) << board.dump();
  EXPECT_EQ(board["ranked_by_latency"], true) << board.dump();
  EXPECT_EQ(board["entries"][0]["implementation"], "unfused");
  EXPECT_EQ(board["entries"][1]["implementation"], "fused");
  EXPECT_GT(board["entries"][1]["vs_best"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(board["entries"][0]["peak_bytes_per_second"].get<double>(), 12e9);
  EXPECT_DOUBLE_EQ(board["entries"][1]["peak_bytes_per_second"].get<double>(), 9.29e9);
  const std::string note = board["peak_note"];
  EXPECT_NE(note.find("NVIDIA H200: SOL peaks differ (9.29 GB/s (measured_copy) vs 12.00 GB/s "
                      "(measured_copy))"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("ranked by mean latency, not SOL %"), std::string::npos) << note;
  // The table says so too, and names each entry's peak.
  const CliResult table = Cli(t.target(), {"leaderboard", "--suite", "synthetic"});
  EXPECT_NE(table.out.find("ranked by mean latency"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(note), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("9.29 GB/s (measured_copy)"), std::string::npos) << table.out;
  // history --runs carries each run's peak.
  const CliResult runs = Cli(t.target(), {"history", "--runs", "--suite", "synthetic"});
  EXPECT_NE(runs.out.find("12.00 GB/s (measured_copy)"), std::string::npos) << runs.out;
  // Export rows carry each result's peak beside its sol_ratio.
  const CliResult rows = Cli(t.target(), {"export", "--suite", "synthetic", "--impl", "unfused"});
  ASSERT_EQ(rows.rc, 0) << rows.err;
  std::size_t seen = 0;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(rows.out, '\n', absl::SkipEmpty()))) {
    const nlohmann::json row = nlohmann::json::parse(line);
    EXPECT_DOUBLE_EQ(row["sol_peak_bytes_per_second"].get<double>(), 12e9) << line;
    EXPECT_EQ(row["sol_peak_source"], "measured_copy") << line;
    ++seen;
  }
  EXPECT_EQ(seen, 2u) << rows.out;
  std::filesystem::remove_all(dir);
}

TEST(SolPeaks, LeaderboardRanksBySolOnOnePeak) {
  const std::string dir = TempDir("peaks-same");
  StoreTwoPeaks(dir, 9.29e9);
  TestServer t = StartServer(StoreOptions(dir));
  const nlohmann::json board =
      Json(Cli(t.target(), {"leaderboard", "--suite", "synthetic", "--json"}));
  ASSERT_EQ(board["entries"].size(), 2u) << board.dump();
  EXPECT_EQ(board.value("ranked_by_latency", false), false) << board.dump();
  EXPECT_EQ(board.value("peak_note", ""), "");
  // One peak: the higher SOL is the shorter time.
  EXPECT_EQ(board["entries"][0]["implementation"], "unfused");
  EXPECT_GT(board["entries"][0]["geomean_sol_ratio"].get<double>(),
            board["entries"][1]["geomean_sol_ratio"].get<double>());
  std::filesystem::remove_all(dir);
}

TEST(SolPeaks, CompareSaysThePeaksDifferAndKeepsTheTimeVerdict) {
  const std::string dir = TempDir("peaks-compare");
  std::string base, moved;
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02, 1000);
    base = *(*store)->RecordNow(WithPeak(report, "fused", 9.29e9), 1000);
    moved = *(*store)->RecordNow(WithPeak(Scaled(report, 1.05), "fused", 10.20e9), 2000);
  }
  TestServer t = StartServer(StoreOptions(dir));
  const nlohmann::json cmp =
      Json(Cli(t.target(), {"compare", base, moved, "--json", "--fail-on", "none"}));
  ASSERT_EQ(cmp["comparisons"].size(), 2u) << cmp.dump();
  EXPECT_EQ(cmp["slower"], 2) << cmp.dump();
  const std::string expected =
      "SOL peaks differ: 9.29 GB/s (measured_copy) vs 10.20 GB/s (measured_copy): compare "
      "times, not SOL %";
  for (const auto& c : cmp["comparisons"]) EXPECT_EQ(c["peak_difference"], expected);
  const CliResult table = Cli(t.target(), {"compare", base, moved});
  EXPECT_NE(table.out.find(expected), std::string::npos) << table.out;
  // Against itself: one peak, nothing said.
  const nlohmann::json same =
      Json(Cli(t.target(), {"compare", base, base, "--json", "--fail-on", "none"}));
  for (const auto& c : same["comparisons"]) EXPECT_EQ(c.value("peak_difference", ""), "");
  std::filesystem::remove_all(dir);
}

TEST(SolPeaks, ResultsStoredBeforeThePeakColumnGetTheirPeakAtStart) {
  const std::string dir = TempDir("peaks-backfill");
  StoreTwoPeaks(dir, 12e9);
  {
    // As a database written before migration 0003 reads after it: the columns at defaults.
    auto db = server::store::OpenSqlite(dir + "/results.sqlite3");
    ASSERT_TRUE(db.ok()) << db.status();
    auto reset =
        (*db)->Query("UPDATE results SET sol_peak_source = -1, sol_peak_bytes_per_second = 0");
    ASSERT_TRUE(reset.ok()) << reset.status();
  }
  server::store::StoreOptions o;
  o.data_dir = dir;
  auto store = server::store::ResultStore::Open(o, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  store->reset();
  auto db = server::store::OpenSqlite(dir + "/results.sqlite3");
  ASSERT_TRUE(db.ok()) << db.status();
  auto rows = (*db)->Query(
      "SELECT implementation, sol_peak_source, sol_peak_bytes_per_second FROM results ORDER BY "
      "implementation, id");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  for (const server::store::SqlRow& row : *rows) {
    EXPECT_EQ(row[1], std::to_string(v1::PEAK_SOURCE_MEASURED_COPY));
    EXPECT_DOUBLE_EQ(std::stod(row[2].value_or("0")), row[0] == "fused" ? 9.29e9 : 12e9);
  }
  std::filesystem::remove_all(dir);
}

// Eight GPUs of one server share a model: one regressed GPU is its own series, and a hot
// run of the same suite is another, instead of each write overwriting the last.
TEST(SolPeaks, RegressionGaugesAreLabelledByDeviceAndProtocol) {
  const std::string dir = TempDir("gauge-labels");
  auto registry = std::make_shared<prometheus::Registry>();
  server::store::StoreOptions o;
  o.data_dir = dir;
  auto store = server::store::ResultStore::Open(o, registry);
  ASSERT_TRUE(store.ok()) << store.status();
  // The same report on cuda:0 and cuda:3 of one server.
  auto two_gpus = [](std::uint64_t seed, double slow_factor_on_3) {
    v1::BenchmarkReport r = SyntheticReport(seed, 10e-6, 0.02);
    v1::BenchmarkReport other = Scaled(SyntheticReport(seed + 100, 10e-6, 0.02), slow_factor_on_3);
    v1::Environment* env = r.add_environments();
    *env = r.environments(0);
    env->mutable_device()->set_name("cuda:3");
    env->mutable_device()->set_uuid("GPU-synthetic-3");
    for (v1::WorkloadResult result : other.results()) {
      result.set_device("cuda:3");
      *r.add_results() = result;
    }
    return r;
  };
  for (std::uint64_t seed : {1, 2, 3}) {
    ASSERT_TRUE((*store)->RecordNow(two_gpus(seed, 1.0), 1000 * seed).ok());
  }
  ASSERT_TRUE((*store)->RecordNow(two_gpus(4, 1.10), 4000).ok());
  std::map<std::string, double> regression;  // device/protocol -> value, for batch_size=17
  for (const auto& family : registry->Collect()) {
    if (family.name != "kerneleval_result_regression") continue;
    for (const auto& m : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& l : m.label) labels[l.name] = l.value;
      if (labels["workload"] != "batch_size=17") continue;
      regression[labels["device"] + "/" + labels["protocol"]] = m.gauge.value;
    }
  }
  const std::string protocol = ProtocolLabel(two_gpus(1, 1.0).protocol());
  EXPECT_EQ(regression,
            (std::map<std::string, double>{{"cuda:0/" + protocol, 0}, {"cuda:3/" + protocol, 1}}));
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerneleval::testing
