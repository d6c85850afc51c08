#include "server/queue/queue_runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "server/core/benchmark_call.h"
#include "server/queue/runs_on.h"
#include "server/store/result_store.h"

namespace kerneleval::server {

// A job this server holds: its lease, and what its heartbeat and its owner asked.
struct QueueRunner::Running {
  store::JobLease lease;
  std::string owner;
  std::shared_ptr<BenchmarkCall> call;
  std::int64_t last_heartbeat_us = 0;
  // Up to when its owner was charged for the device it holds (JobQueue::Charge): the
  // heartbeats and the end charge what came after, each once.
  std::atomic<std::int64_t> charged_until_us{0};
  std::atomic<bool> lost{false};              // the lease ran out: another server may hold it
  std::atomic<bool> released{false};          // given back to the queue as the server stops
  std::atomic<bool> cancel_requested{false};  // by its owner
  std::atomic<bool> finished{false};          // its end is written
  std::string outcome;                        // set with `finished`, before it
};

namespace {

std::int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

std::int64_t Micros(double seconds) { return static_cast<std::int64_t>(seconds * 1e6); }

}  // namespace

std::string QueueWorkerName(const std::string& node_name) {
  std::random_device random;
  return absl::StrFormat("%s:%d:%08x", node_name.empty() ? "server" : node_name,
                         static_cast<int>(getpid()), random());
}

QueueRunner::QueueRunner(ServiceState& state, store::JobQueue& queue, QueueOptions options,
                         prometheus::Registry* registry)
    : state_(state), queue_(queue), options_(std::move(options)) {
  std::set<std::string> kinds;
  for (const auto& w : state_.devices->workers()) kinds.insert(w->backend().kind());
  capacity_ =
      options_.workers >= 0 ? options_.workers : static_cast<int>(state_.devices->workers().size());
  if (registry != nullptr) {
    metrics_ = std::make_unique<QueueMetrics>(*registry,
                                              std::vector<std::string>(kinds.begin(), kinds.end()));
  }
  loop_ = std::thread([this] { Loop(); });
}

QueueRunner::~QueueRunner() { Stop(); }

void QueueRunner::ReadDevicesOnce() {
  if (!claim_kinds_.empty()) return;
  std::vector<DeviceOffer> offers;
  device_archs_.clear();
  for (const auto& w : state_.devices->workers()) {
    const v1::Device d = w->backend().Describe();
    offers.push_back({w->backend().kind(), d.compute_capability()});
    device_archs_.push_back(ArchOfCapability(d.compute_capability()));
  }
  claim_kinds_ = ClaimableKinds(offers, options_.node_name);
}

void QueueRunner::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  woken_ = true;
  cv_.notify_all();
}

void QueueRunner::Stop() {
  std::map<std::string, std::shared_ptr<Running>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    running = running_;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  // Given back before the call stops, so that its report is not stored (it runs again).
  for (auto& [run_id, job] : running) {
    job->released.store(true);
    absl::StatusOr<bool> released = queue_.Release(job->lease);
    if (!released.ok()) {
      LogWarning(absl::StrCat("queue: job ", run_id, " not released (its lease will run out): ",
                              released.status().message()));
    } else if (*released) {
      LogInfo(absl::StrCat("queue: job ", run_id, " given back to the queue as the server stops"));
    }
    CancelCall(*job);
  }
}

void QueueRunner::CancelCall(Running& job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (job.call != nullptr) job.call->Cancel();
}

void QueueRunner::Loop() {
  const double heartbeat = options_.lease_seconds / 3;
  const auto wait = std::chrono::duration<double>(std::min(options_.poll_seconds, heartbeat));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Tick();
    lock.lock();
    cv_.wait_for(lock, wait, [this] { return stop_ || woken_; });
    woken_ = false;
  }
}

void QueueRunner::Tick() {
  // Until the database answers (a PostgreSQL still starting), there is nothing to claim or
  // renew; the running jobs' leases are renewed at the first tick after it does.
  if (state_.results == nullptr || !state_.results->connected()) return;
  const std::int64_t now = NowMicros();
  Heartbeats(now);
  // Jobs of servers that stopped renewing their leases; one server of the fleet does it.
  if (absl::StatusOr<store::JobQueue::Expired> expired = queue_.RequeueExpired(now);
      !expired.ok()) {
    LogWarning(absl::StrCat("queue: expired leases not re-queued: ", expired.status().message()));
  } else if (expired->requeued + expired->failed > 0) {
    LogWarning(absl::StrCat("queue: leases ran out: ", expired->requeued, " jobs queued again, ",
                            expired->failed, " failed out of attempts"));
    if (metrics_ != nullptr) metrics_->AddExpired(*expired);
  }
  RefreshDepth(now);
  // Claims only while every device is warm and the server is not draining: a claimed job
  // must be able to start here.
  if (!state_.ready.load() || state_.draining.load()) return;
  ReadDevicesOnce();
  while (state_.ready.load() && !state_.draining.load()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || static_cast<int>(running_.size()) >= capacity_) return;
    }
    absl::StatusOr<std::optional<store::QueuedJob>> claimed = queue_.Claim(
        options_.worker_name, claim_kinds_, NowMicros(), Micros(options_.lease_seconds));
    if (!claimed.ok()) {
      LogWarning(absl::StrCat("queue: claim failed: ", claimed.status().message()));
      return;
    }
    if (!claimed->has_value()) return;
    if (metrics_ != nullptr) {
      const store::QueuedJob& job = **claimed;
      metrics_->ObserveClaim(KindLabel(job.device_kind),
                             static_cast<double>(job.started_at_us - job.enqueued_at_us) / 1e6);
    }
    StartJob(std::move(**claimed));
  }
}

void QueueRunner::Heartbeats(std::int64_t now_us) {
  std::vector<std::shared_ptr<Running>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [run_id, job] : running_) {
      if (now_us - job->last_heartbeat_us >= Micros(options_.lease_seconds / 3)) {
        due.push_back(job);
      }
    }
  }
  for (const auto& job : due) {
    absl::StatusOr<store::LeaseState> beat =
        queue_.Heartbeat(job->lease, now_us, Micros(options_.lease_seconds));
    if (!beat.ok()) {  // the database is away: try again at the next tick
      LogWarning(absl::StrCat("queue: lease of job ", job->lease.run_id,
                              " not renewed: ", beat.status().message()));
      continue;
    }
    job->last_heartbeat_us = now_us;
    ChargeOwner(*job, now_us);
    if (!beat->held) {
      LogWarning(absl::StrCat("queue: job ", job->lease.run_id,
                              " lost its lease; stopping it without storing its results"));
      job->lost.store(true);
    } else if (beat->cancel_requested) {
      job->cancel_requested.store(true);
    } else {
      continue;
    }
    CancelCall(*job);
  }
}

void QueueRunner::StartJob(store::QueuedJob job) {
  auto running = std::make_shared<Running>();
  running->lease = {job.run_id, options_.worker_name, job.attempts};
  running->owner = job.owner;
  running->last_heartbeat_us = NowMicros();
  running->charged_until_us.store(running->last_heartbeat_us);
  running->cancel_requested.store(job.cancel_requested);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[job.run_id] = running;
    if (metrics_ != nullptr) metrics_->SetRunning(running_.size());
  }
  LogInfo(absl::StrCat("queue: running job ", job.run_id, " of ", job.owner, " (attempt ",
                       job.attempts, " of ", job.max_attempts, ")"));

  Caller caller;
  caller.owner = job.owner;
  caller.cancelled = [running] {
    return running->lost.load() || running->released.load() || running->cancel_requested.load();
  };
  BenchmarkCallbacks callbacks;
  callbacks.run_id = job.run_id;
  callbacks.on_progress = [](const v1::BenchmarkProgress&) {};
  callbacks.record = [this, running](const v1::BenchmarkReport& report) {
    // Lost or released: another attempt stores this job's results, not this one.
    if (running->lost.load() || running->released.load()) return;
    const bool cancelled = running->cancel_requested.load();
    const v1::JobState state = cancelled ? v1::JOB_STATE_CANCELLED : v1::JOB_STATE_DONE;
    const std::string message =
        cancelled ? "cancelled by its owner; the results that finished are stored"
                  : (report.complete() ? "" : "cut short by the protocol's time cap");
    absl::StatusOr<std::string> stored =
        state_.results->RecordFenced(report, running->owner, [&](store::Database& tx) {
          return store::JobQueue::Finish(tx, running->lease, state, message, NowMicros());
        });
    if (stored.ok()) {
      running->outcome = cancelled ? "cancelled" : "done";
      running->finished.store(true);
    } else {
      LogWarning(absl::StrCat("queue: results of job ", running->lease.run_id,
                              " not stored: ", stored.status().message()));
    }
  };
  callbacks.done = [this, running](absl::StatusOr<v1::BenchmarkReport> report) {
    ChargeOwner(*running, NowMicros());
    std::string outcome = running->outcome;
    if (running->lost.load()) {
      outcome = "lost";
    } else if (running->released.load()) {
      outcome = "released";
    } else if (!running->finished.load()) {
      // No report was stored: the job was refused or failed before it measured anything.
      const bool cancelled = running->cancel_requested.load();
      const absl::Status why = report.status();
      absl::Status s = queue_.Finish(
          running->lease, cancelled ? v1::JOB_STATE_CANCELLED : v1::JOB_STATE_FAILED,
          cancelled ? "cancelled by its owner" : std::string(why.ToString()), NowMicros());
      if (!s.ok()) LogWarning(absl::StrCat("queue: end of job not written: ", s.message()));
      outcome = cancelled ? "cancelled" : "failed";
    }
    Ended(running->lease.run_id, outcome);
  };
  // A job for one GPU architecture runs on a device of it where the request names none (a
  // server may hold GPUs of two architectures).
  if (absl::StatusOr<RunsOn> runs_on = ParseRunsOn(job.device_kind, "device_kind");
      runs_on.ok() && !runs_on->arch.empty() && job.request.device().empty()) {
    const auto& workers = state_.devices->workers();
    for (std::size_t i = 0; i < workers.size() && i < device_archs_.size(); ++i) {
      if (device_archs_[i] == runs_on->arch) {
        job.request.set_device(workers[i]->name());
        break;
      }
    }
  }
  absl::StatusOr<std::shared_ptr<BenchmarkCall>> call =
      StartBenchmark(state_, caller, std::move(job.request), std::move(callbacks));
  if (!call.ok()) {
    // Refused before any device work (a submission since deleted, a suite this server does
    // not serve): the job fails with the reason; another claim would fail the same way.
    absl::Status s =
        queue_.Finish(running->lease, v1::JOB_STATE_FAILED, call.status().ToString(), NowMicros());
    if (!s.ok()) LogWarning(absl::StrCat("queue: end of job not written: ", s.message()));
    Ended(running->lease.run_id, "failed");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  running->call = *std::move(call);
  if (running->released.load() || running->lost.load()) running->call->Cancel();
}

void QueueRunner::ChargeOwner(Running& job, std::int64_t now_us) {
  const std::int64_t since = job.charged_until_us.exchange(now_us);
  if (now_us <= since) return;
  // The device time was spent whoever holds the lease now: it counts against the owner.
  if (absl::Status s = queue_.Charge(job.owner, now_us - since, now_us); !s.ok()) {
    LogWarning(absl::StrCat("queue: device time of job ", job.lease.run_id,
                            " not charged to its owner: ", s.message()));
  }
}

void QueueRunner::Ended(const std::string& run_id, const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(run_id);
  if (metrics_ != nullptr) {
    metrics_->Ended(outcome);
    metrics_->SetRunning(running_.size());
  }
  woken_ = true;
  cv_.notify_all();
}

void QueueRunner::RefreshDepth(std::int64_t now_us) {
  // The fleet's figure: one grouped read every few seconds is enough for an alert.
  constexpr std::int64_t kEveryUs = 5000000;
  if (metrics_ == nullptr || now_us - depth_read_us_ < kEveryUs) return;
  absl::StatusOr<std::vector<store::JobQueue::Depth>> depth = queue_.QueuedDepth();
  if (!depth.ok()) return;  // the next tick tries again
  depth_read_us_ = now_us;
  metrics_->SetDepth(*depth, now_us);
}

}  // namespace kerneleval::server
