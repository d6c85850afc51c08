// Each stored run and result keeps its protocol's label (migration 0008): written with the
// run, and filled from the run's stored report for rows written before the column. The
// expected labels are spelled here, as leaderboards and metrics print them.
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "server/store/database.h"
#include "server/store/result_store.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

std::map<std::string, std::string> ResultLabels(const std::string& dir) {
  auto db = server::store::OpenSqlite(dir + "/results.sqlite3");
  EXPECT_TRUE(db.ok()) << db.status();
  std::map<std::string, std::string> labels;
  auto rows = (*db)->Query(
      "SELECT r.run_id, r.protocol, runs.protocol FROM results r JOIN runs "
      "ON runs.id = r.run_id");
  EXPECT_TRUE(rows.ok()) << rows.status();
  for (const server::store::SqlRow& row : *rows) {
    EXPECT_EQ(row[1], row[2]) << "a result and its run disagree";
    labels[row[0].value_or("")] = row[1].value_or("");
  }
  return labels;
}

TEST(ProtocolLabels, WrittenWithTheRunAndFilledForOlderRows) {
  const std::string dir = TempDir("protocol-labels");
  std::string cold, hot_graph;
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    v1::BenchmarkReport report = SyntheticReport(1, 10e-6, 0.02, 50);
    report.mutable_protocol()->set_warmup(10);
    report.mutable_protocol()->set_repetitions(50);
    cold = *(*store)->RecordNow(report, 1000);
    report.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
    report.mutable_protocol()->set_cuda_graph(true);
    hot_graph = *(*store)->RecordNow(report, 2000);
  }
  std::map<std::string, std::string> labels = ResultLabels(dir);
  EXPECT_EQ(labels[cold], "cold");
  EXPECT_EQ(labels[hot_graph], "hot_graph");
  {
    // As a database written before migration 0008 reads after it: the columns at defaults.
    auto db = server::store::OpenSqlite(dir + "/results.sqlite3");
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Query("UPDATE results SET protocol = ''").ok());
    ASSERT_TRUE((*db)->Query("UPDATE runs SET protocol = ''").ok());
  }
  {
    server::store::StoreOptions o;
    o.data_dir = dir;
    auto store = server::store::ResultStore::Open(o, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  labels = ResultLabels(dir);
  EXPECT_EQ(labels[cold], "cold");
  EXPECT_EQ(labels[hot_graph], "hot_graph");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerneleval::testing
