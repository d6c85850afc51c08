// Owners' device budgets (--owner-device-seconds-per-hour, server/device/owner_job_limit.h)
// kept in the results database: real kerneleval-server processes (CPU devices) and the real
// `kerneleval` CLI. On one real PostgreSQL (with_postgres.sh; skipped without it), what an
// owner's job used through one server counts on another, and on a server started after it;
// on one SQLite data directory, it counts after the server restarts. Another owner's budget
// is its own throughout.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cli_process.h"
#include "server/store/database.h"
#include "server/store/owner_usage_table.h"
#include "server/store/result_store.h"
#include "server_process.h"

namespace kerneleval::testing {
namespace {

constexpr char kAlice[] = "alice-token-for-the-fleet-budget";
constexpr char kBob[] = "bob-token-for-the-fleet-budget";

class OwnerBudget : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kerneleval-owner-budget-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tokens_ = (dir_ / "tokens").string();
    std::ofstream(tokens_) << "alice:" << kAlice << "\nbob:" << kBob << "\n";
  }
  void TearDown() override {
    servers_.clear();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A server named `name` keeping its results (and the owners' usage) in `store_args`, with a
  // budget any job exhausts: every job uses more than a microsecond of its device.
  void Start(const std::string& name, const std::vector<std::string>& store_args) {
    const fs::path port_file = dir_ / (name + ".port");
    std::vector<std::string> args = FleetServerArgs(dir_, name);
    args.insert(args.end(),
                {"--auth-token-file", tokens_, "--owner-device-seconds-per-hour", "0.000001"});
    args.insert(args.end(), store_args.begin(), store_args.end());
    fs::remove(port_file);
    auto p = std::make_unique<ServerProcess>(dir_, name, args);
    const int port = WaitForPort(p.get(), port_file);
    ASSERT_GT(port, 0) << p->err();
    targets_[name] = "127.0.0.1:" + std::to_string(port);
    servers_[name] = std::move(p);
    // Serving once its device has warmed up (readiness SERVING).
    bool ready = false;
    for (int i = 0; i < 600 && !ready; ++i) {
      ready = RunCli(dir_.string(), {"--target", targets_[name], "health"}).rc == 0;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(ready) << name << " never became ready: " << servers_[name]->err();
  }

  // Stops `name` with SIGTERM and waits for it to exit.
  void Stop(const std::string& name) {
    servers_.at(name)->Signal(SIGTERM);
    EXPECT_EQ(servers_.at(name)->Wait(std::chrono::seconds(60)), 0) << servers_.at(name)->err();
    servers_.erase(name);
  }

  // One small Run through `server` as the owner of `token`.
  Process Run(const std::string& server, const char* token) {
    return RunCli(dir_.string(), {"--target", targets_.at(server), "--deadline", "300", "--token",
                                  token, "run", "--batch", "4", "--hidden", "64"});
  }

  void ExpectRefusedForAlice(const Process& p, const std::string& where) {
    EXPECT_NE(p.rc, 0) << where << ": " << p.out;
    EXPECT_NE(p.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << where << ": " << p.err;
    EXPECT_NE(p.err.find("owner 'alice' has used"), std::string::npos) << where << ": " << p.err;
    EXPECT_NE(p.err.find("--owner-device-seconds-per-hour"), std::string::npos) << p.err;
  }

  fs::path dir_;
  std::string tokens_;
  std::map<std::string, std::unique_ptr<ServerProcess>> servers_;
  std::map<std::string, std::string> targets_;
};

TEST_F(OwnerBudget, UseThroughOneServerCountsOnAnotherAndOnOneStartedLater) {
  const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
  auto db = server::store::OpenPostgres(url);
  ASSERT_TRUE(db.ok()) << db.status();
  (void)(*db)->Query("DELETE FROM owner_device_usage");  // absent before the first migration
  const std::vector<std::string> shared = {"--results-db", url};
  Start("a", shared);
  Start("b", shared);

  const Process first = Run("a", kAlice);
  ASSERT_EQ(first.rc, 0) << first.err;
  // The charge is written as the job leaves its device, just after its answer: wait for it.
  bool charged = false;
  for (int i = 0; i < 300 && !charged; ++i) {
    auto rows = (*db)->Query(
        "SELECT COUNT(*) FROM owner_device_usage WHERE owner = 'alice' AND device_us > 0");
    ASSERT_TRUE(rows.ok()) << rows.status();
    charged = rows->at(0).at(0) == "1";
    if (!charged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(charged) << "alice's job was never charged in the database";
  const Process second = Run("b", kAlice);
  ExpectRefusedForAlice(second, "through b");
  EXPECT_NE(second.err.find("on the servers sharing the results database"), std::string::npos)
      << second.err;
  const Process bobs = Run("b", kBob);
  EXPECT_EQ(bobs.rc, 0) << bobs.err;

  Stop("b");
  Start("c", shared);
  ExpectRefusedForAlice(Run("c", kAlice), "through c, started after");
}

TEST_F(OwnerBudget, UseCountsAfterARestartOnTheSameDataDirectory) {
  const std::vector<std::string> local = {"--data-dir", (dir_ / "data").string()};
  Start("one", local);
  const Process first = Run("one", kAlice);
  ASSERT_EQ(first.rc, 0) << first.err;
  ExpectRefusedForAlice(Run("one", kAlice), "before the restart");
  Stop("one");

  Start("one", local);
  ExpectRefusedForAlice(Run("one", kAlice), "after the restart");
  const Process bobs = Run("one", kBob);
  EXPECT_EQ(bobs.rc, 0) << bobs.err;
}

// The table alone, on SQLite: charges of one minute add up, the window is read oldest first,
// and the first charge of a new minute deletes the owner's minutes older than a day (only
// that owner's).
TEST(OwnerUsageTable, MinutesAddUpAndOldOnesGo) {
  using server::store::OwnerUsageTable;
  auto db = server::store::OpenSqlite(":memory:");
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(server::store::Migrate(db->get()).ok());
  OwnerUsageTable table(db->get(), [] { return absl::OkStatus(); });
  const std::int64_t minute = OwnerUsageTable::kMinuteUs;
  const std::int64_t now = 1'800'000'000LL * 1'000'000 + 7;  // 7 us into a minute
  const std::int64_t two_days_ago = now - 2 * 24 * 60 * minute;
  ASSERT_TRUE(table.Charge("alice", 5, two_days_ago).ok());
  ASSERT_TRUE(table.Charge("bob", 9, two_days_ago).ok());
  ASSERT_TRUE(table.Charge("alice", 100, now - 2 * minute).ok());
  ASSERT_TRUE(table.Charge("alice", 20, now).ok());
  ASSERT_TRUE(table.Charge("alice", 3, now + 1).ok());  // the same minute

  auto recent = table.MinutesSince("alice", now - 3 * minute);
  ASSERT_TRUE(recent.ok()) << recent.status();
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0].device_us, 100);
  EXPECT_EQ((*recent)[1].device_us, 23);
  EXPECT_EQ((*recent)[1].start_us % minute, 0);
  auto all =
      (*db)->Query("SELECT owner, device_us FROM owner_device_usage ORDER BY owner, minute_us");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u) << "alice's two-day-old minute is gone, bob's stays";
  EXPECT_EQ(*(*all)[0][1], "100");
  EXPECT_EQ(*(*all)[2][0], "bob");
}

}  // namespace
}  // namespace kerneleval::testing
