#include "server/queue/queued_benchmark.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/job_queue.h"

namespace kerneleval::server {
namespace {

// How often the job's row is read: a verdict takes seconds.
constexpr auto kPoll = std::chrono::milliseconds(250);

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class QueuedBenchmark final : public BenchmarkCall,
                              public std::enable_shared_from_this<QueuedBenchmark> {
 public:
  QueuedBenchmark(QueueService* service, store::ResultStore* results, Caller caller,
                  std::string run_id, std::uint32_t workloads, BenchmarkCallbacks callbacks)
      : service_(service),
        results_(results),
        caller_(std::move(caller)),
        run_id_(std::move(run_id)),
        workloads_(workloads),
        callbacks_(std::move(callbacks)) {}

  void Start() {
    std::thread([self = shared_from_this()] { self->Follow(); }).detach();
  }

  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  void Follow() {
    while (true) {
      if (WaitOrCancelled() || caller_.DeadlinePassed()) {
        const bool deadline = caller_.DeadlinePassed() && !IsCancelled();
        // A queued job ends at once; a running one at its server's next heartbeat, which
        // stores what finished (Queue.Cancel).
        (void)service_->queue().Cancel(caller_.owner, run_id_, NowMicros());
        callbacks_.done(deadline
                            ? absl::DeadlineExceededError(
                                  absl::StrCat("the deadline passed while run ", run_id_,
                                               " was queued or running; its job was cancelled"))
                            : absl::CancelledError(absl::StrCat("the benchmark was cancelled; run ",
                                                                run_id_, " keeps what finished")));
        return;
      }
      absl::StatusOr<store::QueuedJob> job = service_->queue().Get(caller_.owner, run_id_);
      if (!job.ok()) {
        // The database coming back is waited for; anything else ends the call.
        if (job.status().code() == absl::StatusCode::kUnavailable) continue;
        callbacks_.done(job.status());
        return;
      }
      switch (job->state) {
        case v1::JOB_STATE_DONE:
          Report();
          return;
        case v1::JOB_STATE_FAILED:
          callbacks_.done(absl::UnavailableError(
              absl::StrCat("run ", run_id_, " failed on ",
                           job->worker.empty() ? "the fleet" : job->worker, ": ", job->message)));
          return;
        case v1::JOB_STATE_CANCELLED:
          callbacks_.done(absl::CancelledError(
              absl::StrCat("run ", run_id_, " was cancelled by its owner: ", job->message)));
          return;
        default:
          break;
      }
    }
  }

  // The stored run, as the server that ran it reported it: each workload's results as
  // progress, then the report.
  void Report() {
    absl::StatusOr<v1::BenchmarkReport> report = results_->RunReport(run_id_, caller_.owner);
    if (!report.ok()) {
      callbacks_.done(report.status());
      return;
    }
    if (callbacks_.on_progress) {
      v1::BenchmarkProgress progress;
      auto flush = [&] {
        if (progress.results_size() == 0) return;
        callbacks_.on_progress(progress);
        progress.clear_results();
      };
      std::uint32_t index = 0;
      for (const v1::WorkloadResult& r : report->results()) {
        if (progress.results_size() > 0 &&
            (r.workload() != progress.workload() || r.device() != progress.device())) {
          flush();
          ++index;
        }
        progress.set_workload_index(index);
        progress.set_workload_count(workloads_);
        progress.set_workload(r.workload());
        progress.set_device(r.device());
        progress.set_run_id(run_id_);
        *progress.add_results() = r;
      }
      flush();
    }
    callbacks_.done(*std::move(report));
  }

  // True when cancelled; else after one poll period.
  bool WaitOrCancelled() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kPoll, [this] { return cancelled_ || caller_.Cancelled(); });
    return cancelled_ || caller_.Cancelled();
  }
  bool IsCancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_ || caller_.Cancelled();
  }

  QueueService* service_;
  store::ResultStore* results_;
  const Caller caller_;
  const std::string run_id_;
  const std::uint32_t workloads_;
  BenchmarkCallbacks callbacks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

}  // namespace

absl::StatusOr<std::shared_ptr<BenchmarkCall>> StartQueuedBenchmark(QueueService* service,
                                                                    store::ResultStore* results,
                                                                    const Caller& caller,
                                                                    v1::BenchmarkRequest request,
                                                                    BenchmarkCallbacks callbacks) {
  v1::EnqueueRequest enqueue;
  *enqueue.mutable_benchmark() = request;
  enqueue.set_priority(v1::JOB_PRIORITY_WAITED_FOR);
  // The started event says what Enqueue's validation resolved.
  BenchmarkPlan plan;
  ASSIGN_OR_RETURN(const v1::Job job, service->EnqueueFor(caller.owner, enqueue, &plan));
  const auto workloads = static_cast<std::uint32_t>(plan.workloads.size());
  if (callbacks.on_started) {
    v1::BenchmarkStarted started;
    started.set_run_id(job.run_id());
    started.set_suite(job.suite());
    started.set_workload_count(workloads);
    *started.mutable_implementations() = request.implementations();
    *started.mutable_protocol() = plan.protocol;
    callbacks.on_started(started);
  }
  auto call = std::make_shared<QueuedBenchmark>(service, results, caller, job.run_id(), workloads,
                                                std::move(callbacks));
  call->Start();
  return call;
}

}  // namespace kerneleval::server
