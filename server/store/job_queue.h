// The verdict queue a fleet shares (migration 0007): Benchmark requests as jobs in the results
// database, claimed by whichever server has an idle device of the job's kind. Rows, SQL and the
// job's state machine only; server/queue/ runs the jobs.
//
//   queued --Claim--> running --Finish(fenced)--> done | failed | cancelled
//      ^                 |  lease runs out: RequeueExpired (attempts left) or failed (none)
//      +-----------------+  Release (the server stops): queued again, the attempt not counted
//
// A claim takes one row with FOR UPDATE SKIP LOCKED on PostgreSQL (SQLite's IMMEDIATE
// transaction is the database's one write lock), so two servers never claim one job. Every
// later write of a running job names its worker and attempt: a server whose lease ran out (and
// whose job another server now holds) changes nothing, and the results of a job are stored in
// the transaction that finishes it (ResultStore::RecordFenced), so they are stored once.
//
// Order of claims: priority class, then the owner whose jobs held devices least in the last
// hour (job_owners.fair_at_us, migration 0010: each device-second an owner's job holds moves
// its place ahead by a second, from a floor of an hour before the charge), then the owner
// whose last claimed job started longest ago (one owner's hundred queued jobs let another
// owner's single job go next), then age.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/queue.pb.h"
#include "server/store/database.h"

namespace kerneleval::server::store {

inline constexpr std::int64_t kQueueRequeueLockKey = 4242001603;
// How long an owner's device time counts against its place in the claim order.
inline constexpr std::int64_t kFairnessWindowUs = std::int64_t{3600} * 1000000;

// A job as the queue holds it.
struct QueuedJob {
  std::string run_id, owner, device_kind, suite, worker, message;
  v1::JobPriority priority = v1::JOB_PRIORITY_WAITED_FOR;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  v1::BenchmarkRequest request;
  std::int64_t enqueued_at_us = 0, started_at_us = 0, finished_at_us = 0, lease_until_us = 0;
  int attempts = 0, max_attempts = 0;
  bool cancel_requested = false;
};

// Which attempt of which job a server holds: what every write of a running job is fenced by.
struct JobLease {
  std::string run_id, worker;
  int attempt = 0;
};

// What a heartbeat learned.
struct LeaseState {
  bool held = false;              // false: the lease ran out and the job is another's (or gone)
  bool cancel_requested = false;  // its owner asked to cancel it
};

class JobQueue {
 public:
  // `db` must outlive the queue (the ResultStore's database).
  explicit JobQueue(Database* db) : db_(db) {}

  absl::Status Enqueue(const QueuedJob& job, std::int64_t now_us);
  // The next job of one of `device_kinds` by the claim order, now running under `worker`'s
  // lease until now + lease; nullopt when none is queued.
  absl::StatusOr<std::optional<QueuedJob>> Claim(const std::string& worker,
                                                 const std::vector<std::string>& device_kinds,
                                                 std::int64_t now_us, std::int64_t lease_us);
  // Renews the lease to now + lease while `lease` still holds the job.
  absl::StatusOr<LeaseState> Heartbeat(const JobLease& lease, std::int64_t now_us,
                                       std::int64_t lease_us);
  // Ends a running job as `state` (done, failed or cancelled) with `message`, on `tx` (a
  // transaction that also stores its results, or the database). ABORTED when `lease` no
  // longer holds it: nothing else in that transaction may be kept.
  static absl::Status Finish(Database& tx, const JobLease& lease, v1::JobState state,
                             const std::string& message, std::int64_t now_us);
  absl::Status Finish(const JobLease& lease, v1::JobState state, const std::string& message,
                      std::int64_t now_us) {
    return Finish(*db_, lease, state, message, now_us);
  }
  // `owner`'s jobs held devices for `device_us` more, ending `now_us`: its place in the claim
  // order moves ahead by as much, from no earlier than now - kFairnessWindowUs.
  absl::Status Charge(const std::string& owner, std::int64_t device_us, std::int64_t now_us);
  // Gives a running job back to the queue at once (the server stops): the attempt is not
  // counted. False when the lease no longer held it.
  absl::StatusOr<bool> Release(const JobLease& lease);
  // Running jobs whose lease ran out before `now`: queued again while attempts remain, else
  // failed saying so. One server of a fleet does it at a time (an advisory lock: `applied`
  // false when another holds it). A fixed number of statements, however many jobs.
  struct Expired {
    bool applied = true;
    std::int64_t requeued = 0, failed = 0;
  };
  absl::StatusOr<Expired> RequeueExpired(std::int64_t now_us);
  // `owner`'s job: a queued one is cancelled at once; a running one is asked to stop (its
  // server sees it at the next heartbeat). NOT_FOUND for another owner's job or none;
  // FAILED_PRECONDITION for a job that has already ended.
  absl::StatusOr<QueuedJob> Cancel(const std::string& owner, const std::string& run_id,
                                   std::int64_t now_us);
  // `owner`'s job (nullopt owner: any owner's); NOT_FOUND otherwise.
  absl::StatusOr<QueuedJob> Get(const std::optional<std::string>& owner, const std::string& run_id);
  // `owner`'s jobs (nullopt: everyone's) that are queued or running, and those that ended
  // within the last `ended_within_us`, newest first, at most `limit`.
  absl::StatusOr<std::vector<QueuedJob>> List(const std::optional<std::string>& owner,
                                              std::int64_t now_us, std::int64_t ended_within_us,
                                              std::int64_t limit);
  // Every queued job's run id in claim order (the first is claimed next), of `device_kind`
  // or every kind when empty: what positions are counted from. Each job placed charges its
  // owner `job_us` (the recent mean, 0 when unknown), as running it would.
  absl::StatusOr<std::vector<std::string>> ClaimOrder(const std::string& device_kind,
                                                      std::int64_t now_us = 0,
                                                      std::int64_t job_us = 0);
  // Queued and running jobs of `owner` (nullopt: everyone's).
  struct Counts {
    std::int64_t queued = 0, running = 0;
  };
  absl::StatusOr<Counts> Count(const std::optional<std::string>& owner);
  // Queued jobs by kind and class: how many, and when the oldest was enqueued.
  struct Depth {
    std::string device_kind;
    v1::JobPriority priority = v1::JOB_PRIORITY_WAITED_FOR;
    std::int64_t queued = 0, oldest_enqueued_at_us = 0;
  };
  absl::StatusOr<std::vector<Depth>> QueuedDepth();
  // Mean seconds from start to finish of the last `count` finished jobs, and how many servers
  // ran jobs in the last hour: what a queued job's estimated start is made from.
  struct Throughput {
    double mean_job_seconds = 0;
    int workers = 0;
  };
  absl::StatusOr<Throughput> RecentThroughput(std::int64_t now_us, int count = 20);

 private:
  Database* db_;
};

// "queued", "running", ... as the jobs table spells states (the contract's short names,
// common/enum_names.h); and back (UNSPECIFIED if unknown).
std::string JobStateName(v1::JobState state);
v1::JobState JobStateFromName(const std::string& name);

}  // namespace kerneleval::server::store
