// Retention: what the store forgets, as set-based statements. A pass costs the same number of
// statements with 30 thousand stored runs as with 30 million: each rule finds its boundary run
// with one SELECT and deletes everything beyond it with one DELETE a table, and downsampling
// touches only results not yet downsampled (0004's partial index), 200 to a statement. One
// server applies it, on a timer: the one holding the retention advisory lock.
#include <cstdio>
#include <ctime>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/result_rows.h"
#include "server/store/result_store.h"
#include "server/store/sample_statistics.h"

namespace kerneleval::server::store {
namespace {

// Results downsampled by one UPDATE: 400 parameters, under SQLite's old limit of 999.
constexpr std::size_t kDownsampleBatch = 200;

// The runs a rule leaves out: `condition` on runs' columns, its parameters from $1.
struct RunSet {
  std::string condition;
  std::vector<SqlValue> params;
};

// Runs beyond the newest `keep` (newest first by time, then id): those at or before the
// (keep+1)-th newest. nullopt when there are no more than `keep`.
absl::StatusOr<std::optional<RunSet>> RunsBeyondNewest(Database& tx, std::int64_t keep) {
  auto boundary = tx.Query(
      "SELECT created_at, id FROM runs ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET $1",
      {keep});
  if (!boundary.ok()) return boundary.status();
  if (boundary->empty()) return std::nullopt;
  const std::int64_t time = std::stoll(boundary->at(0).at(0).value_or("0"));
  return RunSet{"created_at < $1 OR (created_at = $1 AND id <= $2)",
                {time, boundary->at(0).at(1).value_or("")}};
}

absl::Status DeleteRuns(Database& tx, const RunSet& runs) {
  const std::string doomed = absl::StrCat("SELECT id FROM runs WHERE ", runs.condition);
  for (const std::string& sql :
       {absl::StrCat("DELETE FROM regressions WHERE result_id IN (SELECT id FROM results WHERE "
                     "run_id IN (",
                     doomed, "))"),
        absl::StrCat("DELETE FROM results WHERE run_id IN (", doomed, ")"),
        absl::StrCat("DELETE FROM runs WHERE ", runs.condition)}) {
    if (auto s = tx.Query(sql, runs.params); !s.ok()) return s.status();
  }
  return absl::OkStatus();
}

// Raw samples of the results of `runs` become 21 quantiles: the shape a later comparison
// needs, at a fixed size.
absl::Status Downsample(Database& tx, const RunSet& runs) {
  while (true) {
    auto rows =
        tx.Query(absl::StrCat("SELECT id, samples FROM results WHERE downsampled = 0 AND run_id IN "
                              "(SELECT id FROM runs WHERE ",
                              runs.condition, ") ORDER BY id LIMIT ", kDownsampleBatch),
                 runs.params);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return absl::OkStatus();
    std::string cases, ids;
    std::vector<SqlValue> params;
    for (const SqlRow& row : *rows) {
      const std::vector<double> q = Quantiles(SamplesFromJson(row[1].value_or("[]")), 21);
      params.push_back(row[0].value_or(""));
      params.push_back(SamplesToJson(q));
      absl::StrAppend(&cases, " WHEN $", params.size() - 1, " THEN $", params.size());
      absl::StrAppend(&ids, ids.empty() ? "$" : ", $", params.size() - 1);
    }
    auto updated = tx.Query(absl::StrCat("UPDATE results SET samples = NULL, downsampled = 1, "
                                         "quantiles = CASE id",
                                         cases, " END WHERE id IN (", ids, ")"),
                            params);
    if (!updated.ok()) return updated.status();
    if (rows->size() < kDownsampleBatch) return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<bool> ResultStore::ApplyRetention(std::int64_t now) {
  bool applied = false;
  absl::Status s = db_->Transaction([&](Database& tx) -> absl::Status {
    // Servers sharing a database take turns: one applies, the others find the lock held and
    // leave it to that one rather than repeat its deletes.
    auto elected = tx.LockUntilCommit(kRetentionLockKey, /*wait=*/false);
    if (!elected.ok()) return elected.status();
    if (!*elected) return absl::OkStatus();
    applied = true;
    if (options_.max_age_seconds > 0) {
      RETURN_IF_ERROR(DeleteRuns(tx, {"created_at < $1", {now - options_.max_age_seconds}}));
      // Queued jobs (job_queue.h) that ended as long ago as the runs they stored.
      auto jobs = tx.Query(
          "DELETE FROM jobs WHERE state IN ('done', 'failed', 'cancelled') AND finished_at_us < $1",
          {(now - options_.max_age_seconds) * 1000000});
      if (!jobs.ok()) return jobs.status();
    }
    if (options_.max_runs > 0) {
      auto beyond = RunsBeyondNewest(tx, options_.max_runs);
      if (!beyond.ok()) return beyond.status();
      if (beyond->has_value()) RETURN_IF_ERROR(DeleteRuns(tx, **beyond));
    }
    if (options_.raw_sample_runs > 0) {
      auto beyond = RunsBeyondNewest(tx, options_.raw_sample_runs);
      if (!beyond.ok()) return beyond.status();
      if (beyond->has_value()) RETURN_IF_ERROR(Downsample(tx, **beyond));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return applied;
}

// One pass every retention_interval_seconds until the store closes.
void ResultStore::RetentionLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::seconds(options_.retention_interval_seconds),
                 [this] { return stop_; });
    if (stop_) return;
    lock.unlock();
    auto applied = ApplyRetention(static_cast<std::int64_t>(std::time(nullptr)));
    if (!applied.ok()) {
      fprintf(stderr, "results store: retention was not applied (next try in %llds): %s\n",
              static_cast<long long>(options_.retention_interval_seconds),
              std::string(applied.status().message()).c_str());
    }
    lock.lock();
  }
}

}  // namespace kerneleval::server::store
