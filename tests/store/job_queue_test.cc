// The verdict queue's table and rules (server/store/job_queue.h) on both engines: SQLite in a
// temporary file, and a real PostgreSQL when KERNELEVAL_TEST_POSTGRES names one
// (with_postgres.sh). Claims in fair order, leases that fence a server that stalled, attempts
// that run out, release at shutdown, cancel, and (PostgreSQL) concurrent claimers that never
// take one job twice.
#include "server/store/job_queue.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gmock/gmock.h>

#include "absl/strings/str_cat.h"
#include "server/store/database.h"
#include "server/store/result_store.h"

namespace kerneleval::server::store {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kSecond = 1000000;
constexpr std::int64_t kT0 = 1'800'000'000 * kSecond;

class JobQueueTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      const char* url = std::getenv("KERNELEVAL_TEST_POSTGRES");
      if (url == nullptr || *url == '\0') GTEST_SKIP() << "KERNELEVAL_TEST_POSTGRES is not set";
      auto db = OpenPostgres(url, 20);
      ASSERT_TRUE(db.ok()) << db.status();
      db_ = std::move(*db);
    } else {
      path_ = std::filesystem::temp_directory_path() /
              absl::StrCat("kerneleval-job-queue-", getpid(), ".sqlite3");
      std::filesystem::remove(path_);
      auto db = OpenSqlite(path_.string());
      ASSERT_TRUE(db.ok()) << db.status();
      db_ = std::move(*db);
    }
    ASSERT_TRUE(Migrate(db_.get()).ok());
    ASSERT_TRUE(db_->Query("DELETE FROM jobs").ok());
    ASSERT_TRUE(db_->Query("DELETE FROM job_owners").ok());
    queue_ = std::make_unique<JobQueue>(db_.get());
  }
  void TearDown() override {
    queue_.reset();
    db_.reset();
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  // A job of `owner`, enqueued `at` microseconds after kT0.
  std::string Add(const std::string& owner, std::int64_t at, int max_attempts = 3,
                  v1::JobPriority priority = v1::JOB_PRIORITY_WAITED_FOR) {
    QueuedJob job;
    job.run_id = ResultStore::NewRunId();
    job.owner = owner;
    job.device_kind = "cpu";
    job.suite = "small";
    job.priority = priority;
    job.max_attempts = max_attempts;
    job.request.set_suite("small");
    EXPECT_TRUE(queue_->Enqueue(job, kT0 + at).ok());
    return job.run_id;
  }

  std::optional<QueuedJob> ClaimAs(const std::string& worker, std::int64_t at,
                                   std::int64_t lease = 10 * kSecond) {
    auto claimed = queue_->Claim(worker, {"cpu"}, kT0 + at, lease);
    EXPECT_TRUE(claimed.ok()) << claimed.status();
    return claimed.ok() ? *claimed : std::nullopt;
  }

  std::filesystem::path path_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<JobQueue> queue_;
};

TEST_P(JobQueueTest, OwnersTakeTurnsAndClaimOrderForetellsTheClaims) {
  std::vector<std::string> alice;
  for (int i = 0; i < 4; ++i) alice.push_back(Add("alice", i));
  const std::string bob = Add("bob", 10);
  const std::string scheduled = Add("carol", 1, 3, v1::JOB_PRIORITY_SCHEDULED);
  const std::string urgent = Add("carol", 20);

  auto depth = queue_->QueuedDepth();
  ASSERT_TRUE(depth.ok());
  ASSERT_EQ(depth->size(), 2u);  // cpu: waited_for, scheduled
  for (const JobQueue::Depth& d : *depth) {
    const bool waited = d.priority == v1::JOB_PRIORITY_WAITED_FOR;
    EXPECT_EQ(d.queued, waited ? 6 : 1);
    EXPECT_EQ(d.oldest_enqueued_at_us, kT0 + (waited ? 0 : 1));
  }
  auto order = queue_->ClaimOrder("cpu");
  ASSERT_TRUE(order.ok()) << order.status();
  std::vector<std::string> claimed;
  for (int i = 0; i < 7; ++i) {
    std::optional<QueuedJob> job = ClaimAs("w", 100 + i);
    ASSERT_TRUE(job.has_value()) << "claim " << i;
    EXPECT_EQ(job->state, v1::JOB_STATE_RUNNING);
    EXPECT_EQ(job->attempts, 1);
    claimed.push_back(job->run_id);
  }
  EXPECT_FALSE(ClaimAs("w", 200).has_value());
  // Alice's four queued first do not hold bob's and carol's waited-for jobs behind them: one
  // of hers, then theirs, then hers again; the scheduled class comes last.
  EXPECT_EQ(claimed, (std::vector<std::string>{alice[0], bob, urgent, alice[1], alice[2], alice[3],
                                               scheduled}));
  EXPECT_EQ(*order, claimed);
  // Other kinds are not claimed by a server without them.
  Add("alice", 300);
  auto gpu_only = queue_->Claim("w", {"cuda"}, kT0 + 301, kSecond);
  ASSERT_TRUE(gpu_only.ok());
  EXPECT_FALSE(gpu_only->has_value());
}

TEST_P(JobQueueTest, OwnersWhoseJobsHeldDevicesLongerWaitAndOldUseIsForgotten) {
  // Alice's jobs held devices for 20 minutes lately, bob's for one: bob's job, queued after
  // hers, is claimed first, and the order foretells it.
  ASSERT_TRUE(queue_->Charge("alice", 1200 * kSecond, kT0).ok());
  ASSERT_TRUE(queue_->Charge("bob", 60 * kSecond, kT0).ok());
  const std::string alices = Add("alice", 1);
  const std::string bobs = Add("bob", 2);
  auto order = queue_->ClaimOrder("cpu", kT0 + 3, 0);
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(*order, (std::vector<std::string>{bobs, alices}));
  // Bob's next job will run 25 minutes (the recent mean): placed after it, alice goes next.
  const std::string bobs_second = Add("bob", 3);
  order = queue_->ClaimOrder("cpu", kT0 + 4, 1500 * kSecond);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(*order, (std::vector<std::string>{bobs, alices, bobs_second}));
  std::optional<QueuedJob> first = ClaimAs("w", 5);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->run_id, bobs);
  // Bob's claimed job holds its device for half an hour: now he is the heavier user.
  ASSERT_TRUE(queue_->Charge("bob", 1800 * kSecond, kT0 + 1800 * kSecond).ok());
  std::optional<QueuedJob> second = ClaimAs("w", 1800 * kSecond + 1);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->run_id, alices);

  std::optional<QueuedJob> third = ClaimAs("w", 1800 * kSecond + 2);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->run_id, bobs_second);

  // Three hours on, use older than the hour is forgotten: alice's twenty minutes then weigh
  // less than carol's one minute now.
  const std::int64_t later = 3 * 3600 * kSecond;
  ASSERT_TRUE(queue_->Charge("carol", 60 * kSecond, kT0 + later).ok());
  const std::string carols = Add("carol", later + 1);
  const std::string alices_late = Add("alice", later + 2);
  std::optional<QueuedJob> fourth = ClaimAs("w", later + 3);
  ASSERT_TRUE(fourth.has_value());
  EXPECT_EQ(fourth->run_id, alices_late);
  std::optional<QueuedJob> fifth = ClaimAs("w", later + 4);
  ASSERT_TRUE(fifth.has_value());
  EXPECT_EQ(fifth->run_id, carols);
}

TEST_P(JobQueueTest, ALeaseThatRanOutFencesTheServerThatHeldIt) {
  const std::string id = Add("alice", 0);
  std::optional<QueuedJob> first = ClaimAs("stalled", 1, kSecond);
  ASSERT_TRUE(first.has_value());
  const JobLease stalled{id, "stalled", first->attempts};

  // Before the lease runs out nothing is re-queued; after it, the job is queued again.
  ASSERT_TRUE(queue_->RequeueExpired(kT0 + kSecond / 2).ok());
  EXPECT_FALSE(ClaimAs("other", 2).has_value());
  auto requeued = queue_->RequeueExpired(kT0 + 3 * kSecond);
  ASSERT_TRUE(requeued.ok());
  EXPECT_TRUE(requeued->applied);
  EXPECT_EQ(requeued->requeued, 1);
  EXPECT_EQ(requeued->failed, 0);
  auto got = queue_->Get("alice", id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, v1::JOB_STATE_QUEUED);
  EXPECT_THAT(got->message, HasSubstr("lease of stalled ran out"));

  std::optional<QueuedJob> second = ClaimAs("other", 4 * kSecond);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->attempts, 2);
  // The stalled server wakes up: its heartbeat and its finish change nothing.
  auto beat = queue_->Heartbeat(stalled, kT0 + 5 * kSecond, kSecond);
  ASSERT_TRUE(beat.ok());
  EXPECT_FALSE(beat->held);
  absl::Status late = queue_->Finish(stalled, v1::JOB_STATE_DONE, "", kT0 + 5 * kSecond);
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted) << late;
  // Nor does a transaction it fences: what it wrote before the fence is rolled back.
  QueuedJob written;
  written.run_id = ResultStore::NewRunId();
  written.owner = "alice";
  written.device_kind = "cpu";
  absl::Status fenced = db_->Transaction([&](Database& tx) -> absl::Status {
    if (absl::Status s = JobQueue(&tx).Enqueue(written, kT0); !s.ok()) return s;
    return JobQueue::Finish(tx, stalled, v1::JOB_STATE_DONE, "", kT0 + 5 * kSecond);
  });
  EXPECT_EQ(fenced.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(queue_->Get("alice", written.run_id).status().code(), absl::StatusCode::kNotFound);

  const JobLease holder{id, "other", 2};
  ASSERT_TRUE(queue_->Finish(holder, v1::JOB_STATE_DONE, "", kT0 + 6 * kSecond).ok());
  got = queue_->Get("alice", id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, v1::JOB_STATE_DONE);
  EXPECT_EQ(got->worker, "other");
}

TEST_P(JobQueueTest, AJobOutOfAttemptsFailsSayingSo) {
  const std::string id = Add("alice", 0, /*max_attempts=*/2);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    std::optional<QueuedJob> job = ClaimAs("w", attempt * 10 * kSecond, kSecond);
    ASSERT_TRUE(job.has_value()) << attempt;
    auto expired = queue_->RequeueExpired(kT0 + (attempt * 10 + 5) * kSecond);
    ASSERT_TRUE(expired.ok());
    EXPECT_EQ(expired->failed, attempt == 2 ? 1 : 0);
  }
  auto got = queue_->Get("alice", id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, v1::JOB_STATE_FAILED);
  EXPECT_THAT(got->message, HasSubstr("attempt 2 of 2; no attempts left"));
  EXPECT_FALSE(ClaimAs("w", 100 * kSecond).has_value());
}

TEST_P(JobQueueTest, AReleasedJobIsQueuedAgainWithoutSpendingAnAttempt) {
  const std::string id = Add("alice", 0, /*max_attempts=*/1);
  std::optional<QueuedJob> job = ClaimAs("stopping", 1);
  ASSERT_TRUE(job.has_value());
  auto released = queue_->Release({id, "stopping", job->attempts});
  ASSERT_TRUE(released.ok());
  EXPECT_TRUE(*released);
  std::optional<QueuedJob> again = ClaimAs("next", 2);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->run_id, id);
  EXPECT_EQ(again->attempts, 1);
  // A release by a server that no longer holds it does nothing.
  released = queue_->Release({id, "stopping", 1});
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(*released);
}

TEST_P(JobQueueTest, CancelEndsAQueuedJobAndAsksARunningOne) {
  const std::string queued = Add("alice", 0);
  const std::string running = Add("alice", 1);
  // Bob cannot see, let alone cancel, alice's jobs.
  EXPECT_EQ(queue_->Cancel("bob", queued, kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(queue_->Get("bob", queued).status().code(), absl::StatusCode::kNotFound);

  auto cancelled = queue_->Cancel("alice", queued.substr(0, 10), kT0 + 2);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, v1::JOB_STATE_CANCELLED);
  std::optional<QueuedJob> job = ClaimAs("w", 3);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->run_id, running);
  auto asked = queue_->Cancel("alice", running, kT0 + 4);
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(asked->state, v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(asked->cancel_requested);
  auto beat = queue_->Heartbeat({running, "w", 1}, kT0 + 5, kSecond);
  ASSERT_TRUE(beat.ok());
  EXPECT_TRUE(beat->held);
  EXPECT_TRUE(beat->cancel_requested);
  EXPECT_EQ(queue_->Cancel("alice", queued, kT0 + 6).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(queue_->Get("alice", "not-hex").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(JobQueueTest, ConcurrentClaimersNeverTakeOneJobTwice) {
  if (GetParam() != "postgresql") GTEST_SKIP() << "SQLite serves one server";
  constexpr int kJobs = 200, kClaimers = 16;
  for (int i = 0; i < kJobs; ++i) Add(absl::StrCat("owner", i % 5), i);
  std::mutex mu;
  std::map<std::string, int> claims;
  std::atomic<int> errors{0};
  std::vector<std::thread> claimers;
  for (int c = 0; c < kClaimers; ++c) {
    claimers.emplace_back([&, c] {
      while (true) {
        auto job = queue_->Claim(absl::StrCat("w", c), {"cpu"}, kT0 + kSecond, 60 * kSecond);
        if (!job.ok()) {
          ++errors;
          return;
        }
        if (!job->has_value()) return;
        std::lock_guard<std::mutex> lock(mu);
        ++claims[(*job)->run_id];
      }
    });
  }
  for (std::thread& t : claimers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(claims.size(), static_cast<std::size_t>(kJobs));
  for (const auto& [id, count] : claims) EXPECT_EQ(count, 1) << id;
}

INSTANTIATE_TEST_SUITE_P(Engines, JobQueueTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kerneleval::server::store
