#include "server/store/job_queue.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "server/store/result_store_sql.h"

namespace kerneleval::server::store {
namespace {

constexpr char kJobColumns[] =
    "run_id, owner, device_kind, priority, suite, request, state, enqueued_at_us, "
    "started_at_us, finished_at_us, worker, lease_until_us, attempts, max_attempts, "
    "cancel_requested, message";

// The claim order's key for a queued job (job_queue.h): class, then the owner whose jobs held
// devices least lately, then the one whose last job started longest ago, then age.
// ClaimOrder replays the same keys.
constexpr char kClaimOrder[] =
    " ORDER BY j.priority, COALESCE(o.fair_at_us, 0), COALESCE(o.last_started_at_us, 0), "
    "j.enqueued_at_us, j.run_id";
// The jobs with their owner's latest claim (job_owners, migration 0009), for kClaimOrder.
constexpr char kJobsWithOwners[] = " FROM jobs j LEFT JOIN job_owners o ON o.owner = j.owner";

absl::StatusOr<QueuedJob> JobOf(const SqlRow& row) {
  QueuedJob job;
  job.run_id = row.at(0).value_or("");
  job.owner = row.at(1).value_or("");
  job.device_kind = row.at(2).value_or("");
  job.priority = static_cast<v1::JobPriority>(Int(row.at(3)));
  job.suite = row.at(4).value_or("");
  std::string bytes;
  if (!absl::Base64Unescape(row.at(5).value_or(""), &bytes) ||
      !job.request.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("job ", job.run_id, ": its request does not parse"));
  }
  job.state = JobStateFromName(row.at(6).value_or(""));
  job.enqueued_at_us = Int(row.at(7));
  job.started_at_us = Int(row.at(8));
  job.finished_at_us = Int(row.at(9));
  job.worker = row.at(10).value_or("");
  job.lease_until_us = Int(row.at(11));
  job.attempts = static_cast<int>(Int(row.at(12)));
  job.max_attempts = static_cast<int>(Int(row.at(13)));
  job.cancel_requested = Int(row.at(14)) != 0;
  job.message = row.at(15).value_or("");
  return job;
}

absl::StatusOr<std::vector<QueuedJob>> JobsOf(const absl::StatusOr<std::vector<SqlRow>>& rows) {
  if (!rows.ok()) return rows.status();
  std::vector<QueuedJob> jobs;
  for (const SqlRow& row : *rows) {
    absl::StatusOr<QueuedJob> job = JobOf(row);
    if (!job.ok()) return job.status();
    jobs.push_back(std::move(*job));
  }
  return jobs;
}

bool IsRunIdText(const std::string& text) {
  return !text.empty() && text.size() <= 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isxdigit(c); });
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  return EnumShortName(*v1::JobState_descriptor(), state);
}

v1::JobState JobStateFromName(const std::string& name) {
  for (v1::JobState s : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_DONE,
                         v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    if (name == JobStateName(s)) return s;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::Status JobQueue::Enqueue(const QueuedJob& job, std::int64_t now_us) {
  return db_
      ->Query(
          "INSERT INTO jobs (run_id, owner, device_kind, priority, suite, request, state, "
          "enqueued_at_us, max_attempts) VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8)",
          {job.run_id, job.owner, job.device_kind, std::int64_t{job.priority}, job.suite,
           absl::Base64Escape(job.request.SerializeAsString()), now_us,
           std::int64_t{std::max(1, job.max_attempts)}})
      .status();
}

absl::StatusOr<std::optional<QueuedJob>> JobQueue::Claim(
    const std::string& worker, const std::vector<std::string>& device_kinds, std::int64_t now_us,
    std::int64_t lease_us) {
  if (device_kinds.empty()) return std::nullopt;
  // Most polls find nothing: a plain read, no transaction and no lock.
  std::vector<SqlValue> params;
  std::vector<std::string> marks;
  for (const std::string& kind : device_kinds) {
    params.push_back(kind);
    marks.push_back(absl::StrCat("$", params.size()));
  }
  const std::string kinds = absl::StrCat("device_kind IN (", absl::StrJoin(marks, ", "), ")");
  auto any = db_->Query(
      absl::StrCat("SELECT 1 FROM jobs WHERE state = 'queued' AND ", kinds, " LIMIT 1"), params);
  if (!any.ok()) return any.status();
  if (any->empty()) return std::nullopt;

  std::optional<QueuedJob> claimed;
  const bool postgres = std::string(db_->engine()) == "postgresql";
  absl::Status s = db_->Transaction([&](Database& tx) -> absl::Status {
    // SKIP LOCKED: a job another server is claiming right now is passed over, not waited for.
    auto next = tx.Query(
        absl::StrCat("SELECT j.run_id", kJobsWithOwners, " WHERE j.state = 'queued' AND j.", kinds,
                     kClaimOrder, " LIMIT 1", postgres ? " FOR UPDATE OF j SKIP LOCKED" : ""),
        params);
    if (!next.ok()) return next.status();
    if (next->empty()) return absl::OkStatus();
    auto rows = tx.Query(
        absl::StrCat("UPDATE jobs SET state = 'running', worker = $1, started_at_us = $2, "
                     "lease_until_us = $3, attempts = attempts + 1 WHERE run_id = $4 AND state = "
                     "'queued' RETURNING ",
                     kJobColumns),
        {worker, now_us, now_us + lease_us, next->front().at(0).value_or("")});
    ASSIGN_OR_RETURN(std::vector<QueuedJob> jobs, JobsOf(rows));
    if (jobs.empty()) return absl::OkStatus();
    claimed = std::move(jobs.front());
    // The owner is now the one served most recently: the next claim serves another first.
    return tx
        .Query(
            "INSERT INTO job_owners (owner, last_started_at_us) VALUES ($1, $2) ON CONFLICT "
            "(owner) DO UPDATE SET last_started_at_us = excluded.last_started_at_us WHERE "
            "job_owners.last_started_at_us < excluded.last_started_at_us",
            {claimed->owner, now_us})
        .status();
  });
  if (!s.ok()) return s;
  return claimed;
}

absl::StatusOr<LeaseState> JobQueue::Heartbeat(const JobLease& lease, std::int64_t now_us,
                                               std::int64_t lease_us) {
  auto rows = db_->Query(
      "UPDATE jobs SET lease_until_us = $1 WHERE run_id = $2 AND worker = $3 AND attempts = $4 "
      "AND state = 'running' RETURNING cancel_requested",
      {now_us + lease_us, lease.run_id, lease.worker, std::int64_t{lease.attempt}});
  if (!rows.ok()) return rows.status();
  LeaseState state;
  state.held = !rows->empty();
  state.cancel_requested = state.held && Int(rows->front().at(0)) != 0;
  return state;
}

absl::Status JobQueue::Finish(Database& tx, const JobLease& lease, v1::JobState state,
                              const std::string& message, std::int64_t now_us) {
  auto rows = tx.Query(
      "UPDATE jobs SET state = $1, message = $2, finished_at_us = $3, lease_until_us = NULL "
      "WHERE run_id = $4 AND worker = $5 AND attempts = $6 AND state = 'running' RETURNING "
      "run_id",
      {std::string(JobStateName(state)), message, now_us, lease.run_id, lease.worker,
       std::int64_t{lease.attempt}});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::AbortedError(absl::StrCat("job ", lease.run_id, ": attempt ", lease.attempt,
                                           " of ", lease.worker,
                                           " no longer holds it (its lease ran out)"));
  }
  return absl::OkStatus();
}

absl::Status JobQueue::Charge(const std::string& owner, std::int64_t device_us,
                              std::int64_t now_us) {
  if (device_us <= 0) return absl::OkStatus();
  const std::int64_t floor = now_us - kFairnessWindowUs;
  return db_
      ->Query(
          "INSERT INTO job_owners (owner, last_started_at_us, fair_at_us) VALUES ($1, 0, $2) "
          "ON CONFLICT (owner) DO UPDATE SET fair_at_us = CASE WHEN job_owners.fair_at_us < $3 "
          "THEN $3 ELSE job_owners.fair_at_us END + $4",
          {owner, floor + device_us, floor, device_us})
      .status();
}

absl::StatusOr<bool> JobQueue::Release(const JobLease& lease) {
  auto rows = db_->Query(
      "UPDATE jobs SET state = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'queued' END, "
      "attempts = attempts - 1, lease_until_us = NULL, message = 'released by ' || worker || ' "
      "as it stopped' WHERE run_id = $1 AND worker = $2 AND attempts = $3 AND state = 'running' "
      "RETURNING run_id",
      {lease.run_id, lease.worker, std::int64_t{lease.attempt}});
  if (!rows.ok()) return rows.status();
  return !rows->empty();
}

absl::StatusOr<JobQueue::Expired> JobQueue::RequeueExpired(std::int64_t now_us) {
  auto any = db_->Query(
      "SELECT 1 FROM jobs WHERE state = 'running' AND lease_until_us < $1 LIMIT 1", {now_us});
  if (!any.ok()) return any.status();
  Expired expired;
  if (any->empty()) return expired;
  absl::Status s = db_->Transaction([&](Database& tx) -> absl::Status {
    ASSIGN_OR_RETURN(expired.applied, tx.LockUntilCommit(kQueueRequeueLockKey, /*wait=*/false));
    if (!expired.applied) return absl::OkStatus();
    auto failed = tx.Query(
        "UPDATE jobs SET state = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'failed' "
        "END, finished_at_us = $1, lease_until_us = NULL, message = 'the lease of ' || worker || "
        "' ran out on attempt ' || attempts || ' of ' || max_attempts || '; no attempts left' "
        "WHERE state = 'running' AND lease_until_us < $1 AND attempts >= max_attempts "
        "RETURNING run_id",
        {now_us});
    if (!failed.ok()) return failed.status();
    expired.failed = static_cast<std::int64_t>(failed->size());
    auto requeued = tx.Query(
        "UPDATE jobs SET state = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'queued' "
        "END, finished_at_us = CASE WHEN cancel_requested = 1 THEN CAST($1 AS BIGINT) ELSE NULL "
        "END, lease_until_us = NULL, message = 'the lease of ' || worker || ' ran out on "
        "attempt ' || attempts WHERE state = 'running' AND lease_until_us < $1 RETURNING run_id",
        {now_us});
    if (!requeued.ok()) return requeued.status();
    expired.requeued = static_cast<std::int64_t>(requeued->size());
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return expired;
}

absl::StatusOr<QueuedJob> JobQueue::Get(const std::optional<std::string>& owner,
                                        const std::string& run_id) {
  if (!IsRunIdText(run_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_id: '", run_id.substr(0, 64), "' is not a run id (hexadecimal)"));
  }
  std::vector<SqlValue> params = {run_id};
  std::string where = "(run_id = $1 OR run_id LIKE $1 || '%')";
  if (owner) {
    params.push_back(*owner);
    where += " AND owner = $2";
  }
  // An exact id, or a prefix of eight characters or more that names one job.
  auto rows = db_->Query(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE ", where,
                                      " ORDER BY CASE WHEN run_id = $1 THEN 0 ELSE 1 END LIMIT 3"),
                         params);
  ASSIGN_OR_RETURN(std::vector<QueuedJob> jobs, JobsOf(rows));
  if (!jobs.empty() && jobs.front().run_id == run_id) return jobs.front();
  if (jobs.size() == 1 && run_id.size() >= 8) return jobs.front();
  if (jobs.size() > 1 && run_id.size() >= 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_id: '", run_id, "' is the start of several jobs' ids; give more of it"));
  }
  return absl::NotFoundError(absl::StrCat("run_id: no job '", run_id, "' of yours"));
}

absl::StatusOr<QueuedJob> JobQueue::Cancel(const std::string& owner, const std::string& run_id,
                                           std::int64_t now_us) {
  ASSIGN_OR_RETURN(QueuedJob job, Get(owner, run_id));
  if (job.state != v1::JOB_STATE_QUEUED && job.state != v1::JOB_STATE_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("run_id: job ", job.run_id, " has already ",
                                                      "ended (", JobStateName(job.state), ")"));
  }
  absl::Status s = db_->Transaction([&](Database& tx) -> absl::Status {
    auto queued = tx.Query(
        "UPDATE jobs SET state = 'cancelled', finished_at_us = $2, message = 'cancelled by its "
        "owner before it started' WHERE run_id = $1 AND state = 'queued'",
        {job.run_id, now_us});
    if (!queued.ok()) return queued.status();
    return tx
        .Query("UPDATE jobs SET cancel_requested = 1 WHERE run_id = $1 AND state = 'running'",
               {job.run_id})
        .status();
  });
  if (!s.ok()) return s;
  return Get(owner, job.run_id);
}

absl::StatusOr<std::vector<QueuedJob>> JobQueue::List(const std::optional<std::string>& owner,
                                                      std::int64_t now_us,
                                                      std::int64_t ended_within_us,
                                                      std::int64_t limit) {
  std::vector<SqlValue> params = {now_us - ended_within_us, limit};
  std::string where = "(state IN ('queued', 'running') OR finished_at_us >= $1)";
  if (owner) {
    params.push_back(*owner);
    where += " AND owner = $3";
  }
  return JobsOf(db_->Query(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE ", where,
                                        " ORDER BY enqueued_at_us DESC, run_id LIMIT $2"),
                           params));
}

absl::StatusOr<std::vector<std::string>> JobQueue::ClaimOrder(const std::string& device_kind,
                                                              std::int64_t now_us,
                                                              std::int64_t job_us) {
  // Claim's ORDER BY, replayed: each claim charges its owner a job's time and makes it the one
  // served most recently, so owners take turns within a class by their device time. At most
  // the first 10000 queued jobs are placed.
  std::vector<SqlValue> params;
  std::string kind;
  if (!device_kind.empty()) {
    params.push_back(device_kind);
    kind = " AND device_kind = $1";
  }
  auto queued = db_->Query(absl::StrCat("SELECT run_id, owner, priority, enqueued_at_us FROM jobs "
                                        "WHERE state = 'queued'",
                                        kind,
                                        " ORDER BY priority, enqueued_at_us, run_id LIMIT "
                                        "10000"),
                           params);
  if (!queued.ok()) return queued.status();
  auto last = db_->Query("SELECT owner, last_started_at_us, fair_at_us FROM job_owners");
  if (!last.ok()) return last.status();
  std::map<std::string, std::int64_t> last_start, fair_at;
  for (const SqlRow& row : *last) {
    last_start[row.at(0).value_or("")] = Int(row.at(1));
    fair_at[row.at(0).value_or("")] = Int(row.at(2));
  }
  // Per class, per owner: that owner's queued jobs (enqueued at, run id), oldest first.
  using Queued = std::pair<std::int64_t, std::string>;
  std::map<std::int64_t, std::map<std::string, std::deque<Queued>>> classes;
  for (const SqlRow& row : *queued) {
    classes[Int(row.at(2))][row.at(1).value_or("")].emplace_back(Int(row.at(3)),
                                                                 row.at(0).value_or(""));
  }
  std::vector<std::string> order;
  std::int64_t turn = std::numeric_limits<std::int64_t>::max() / 2;
  for (auto& [priority, owners] : classes) {
    while (!owners.empty()) {
      // The owner with the least device time lately, then the one served longest ago (ties:
      // the older job, as the SQL's next key does).
      auto next = std::min_element(owners.begin(), owners.end(), [&](const auto& a, const auto& b) {
        return std::tie(fair_at[a.first], last_start[a.first], a.second.front()) <
               std::tie(fair_at[b.first], last_start[b.first], b.second.front());
      });
      order.push_back(next->second.front().second);
      next->second.pop_front();
      last_start[next->first] = ++turn;
      if (job_us > 0) {
        std::int64_t& at = fair_at[next->first];
        at = std::max(at, now_us - kFairnessWindowUs) + job_us;
      }
      if (next->second.empty()) owners.erase(next);
    }
  }
  return order;
}

absl::StatusOr<JobQueue::Counts> JobQueue::Count(const std::optional<std::string>& owner) {
  std::vector<SqlValue> params;
  std::string where = "state IN ('queued', 'running')";
  if (owner) {
    params.push_back(*owner);
    where += " AND owner = $1";
  }
  auto rows = db_->Query(
      absl::StrCat("SELECT state, COUNT(*) FROM jobs WHERE ", where, " GROUP BY state"), params);
  if (!rows.ok()) return rows.status();
  Counts counts;
  for (const SqlRow& row : *rows) {
    (row.at(0) == "queued" ? counts.queued : counts.running) = Int(row.at(1));
  }
  return counts;
}

absl::StatusOr<std::vector<JobQueue::Depth>> JobQueue::QueuedDepth() {
  auto rows = db_->Query(
      "SELECT device_kind, priority, COUNT(*), MIN(enqueued_at_us) FROM jobs WHERE state = "
      "'queued' GROUP BY device_kind, priority");
  if (!rows.ok()) return rows.status();
  std::vector<Depth> depth;
  for (const SqlRow& row : *rows) {
    depth.push_back({row.at(0).value_or(""), static_cast<v1::JobPriority>(Int(row.at(1))),
                     Int(row.at(2)), Int(row.at(3))});
  }
  return depth;
}

absl::StatusOr<JobQueue::Throughput> JobQueue::RecentThroughput(std::int64_t now_us, int count) {
  Throughput t;
  auto mean = db_->Query(
      "SELECT AVG(finished_at_us - started_at_us) FROM (SELECT finished_at_us, started_at_us "
      "FROM jobs WHERE state = 'done' AND started_at_us IS NOT NULL AND finished_at_us IS NOT "
      "NULL ORDER BY finished_at_us DESC LIMIT $1) recent",
      {std::int64_t{count}});
  if (!mean.ok()) return mean.status();
  if (!mean->empty() && mean->front().at(0)) {
    t.mean_job_seconds = std::atof(mean->front().at(0)->c_str()) / 1e6;
  }
  auto workers = db_->Query("SELECT COUNT(DISTINCT worker) FROM jobs WHERE started_at_us >= $1",
                            {now_us - 3600000000});
  if (!workers.ok()) return workers.status();
  if (!workers->empty()) t.workers = static_cast<int>(Int(workers->front().at(0)));
  return t;
}

}  // namespace kerneleval::server::store
