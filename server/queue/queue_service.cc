#include "server/queue/queue_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/bounded_text.h"
#include "common/status_macros.h"
#include "server/core/admission.h"
#include "server/core/request_validation.h"
#include "server/grpc/raw_unary.h"
#include "server/grpc/status.h"
#include "server/identity/caller_identity.h"
#include "server/queue/runs_on.h"
#include "server/store/result_store.h"

namespace kerneleval::server {
namespace {

std::int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

constexpr std::int64_t kDefaultEndedWithinSeconds = 3600;
constexpr std::uint32_t kDefaultListLimit = 100, kMaxListLimit = 1000;
// How often Watch reads the job's row: a job's state changes in seconds, not milliseconds.
constexpr auto kWatchPoll = std::chrono::milliseconds(500);

bool Ended(v1::JobState state) {
  return state == v1::JOB_STATE_DONE || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// What positions and estimates are made from, read once per answer.
struct QueueView {
  std::map<std::string, std::vector<std::string>> order;  // by device kind
  store::JobQueue::Throughput throughput;
};

absl::StatusOr<v1::Job> ToWire(store::JobQueue& queue, const store::QueuedJob& job,
                               QueueView& view) {
  v1::Job out;
  out.set_run_id(job.run_id);
  out.set_owner(job.owner);
  out.set_state(job.state);
  out.set_priority(job.priority);
  out.set_suite(job.suite);
  out.set_device_kind(job.device_kind);
  out.set_enqueued_unix_micros(job.enqueued_at_us);
  out.set_started_unix_micros(job.state == v1::JOB_STATE_QUEUED ? 0 : job.started_at_us);
  out.set_finished_unix_micros(job.finished_at_us);
  out.set_worker(job.worker);
  out.set_attempts(static_cast<std::uint32_t>(std::max(0, job.attempts)));
  out.set_max_attempts(static_cast<std::uint32_t>(std::max(0, job.max_attempts)));
  out.set_cancel_requested(job.cancel_requested);
  out.set_message(job.message);
  if (job.state != v1::JOB_STATE_QUEUED) return out;
  auto order = view.order.find(job.device_kind);
  if (order == view.order.end()) {
    // Each job placed ahead is charged the recent mean job time, as running it would be.
    ASSIGN_OR_RETURN(
        std::vector<std::string> ids,
        queue.ClaimOrder(job.device_kind, NowMicros(),
                         static_cast<std::int64_t>(view.throughput.mean_job_seconds * 1e6)));
    order = view.order.emplace(job.device_kind, std::move(ids)).first;
  }
  const auto at = std::find(order->second.begin(), order->second.end(), job.run_id);
  if (at == order->second.end()) return out;  // claimed since it was read
  const std::size_t position = static_cast<std::size_t>(at - order->second.begin()) + 1;
  out.set_position(static_cast<std::uint32_t>(position));
  // The jobs ahead, spread over the servers that ran jobs lately, at the recent mean time.
  const store::JobQueue::Throughput& t = view.throughput;
  if (t.mean_job_seconds > 0 && t.workers > 0) {
    out.set_estimated_start_seconds(std::ceil(static_cast<double>(position - 1) / t.workers) *
                                    t.mean_job_seconds);
  }
  return out;
}

absl::StatusOr<QueueView> ReadView(store::JobQueue& queue) {
  QueueView view;
  ASSIGN_OR_RETURN(view.throughput, queue.RecentThroughput(NowMicros()));
  return view;
}

// Watch's answer to a body that does not parse: finished at once.
class WatchRefusal final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  void OnDone() override { delete this; }
};

// Follows one job's row until it ends or the client leaves, on a thread of its own: each
// change of what the client would see is one message; the last one is the job's end.
class WatchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  WatchReactor(store::JobQueue* queue, std::string owner, std::string run_id)
      : queue_(queue), owner_(std::move(owner)), run_id_(std::move(run_id)) {
    std::thread([this] { Poll(); }).detach();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) gone_ = true;
    cv_.notify_all();
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    cv_.notify_all();
  }
  void OnDone() override { delete this; }

 private:
  void Poll() {
    std::string last;
    while (true) {
      grpc::Status end;
      bool finish = false;
      absl::StatusOr<v1::Job> job = Read();
      if (!job.ok() && job.status().code() != absl::StatusCode::kUnavailable) {
        end = ToGrpcStatus(job.status());
        finish = true;
      } else if (job.ok()) {
        const std::string bytes = job->SerializeAsString();
        if (bytes != last && !Write(*job)) {
          end = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
          finish = true;
        }
        last = bytes;
        finish = finish || Ended(job->state());
      }
      if (!finish && !Sleep()) {
        end = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        finish = true;
      }
      if (finish) {
        Finish(end);  // last: OnDone may delete this at once
        return;
      }
    }
  }

  absl::StatusOr<v1::Job> Read() {
    ASSIGN_OR_RETURN(store::QueuedJob job, queue_->Get(owner_, run_id_));
    run_id_ = job.run_id;  // a prefix resolved once
    ASSIGN_OR_RETURN(QueueView view, ReadView(*queue_));
    return ToWire(*queue_, job, view);
  }

  // False when the client went away.
  bool Write(const v1::Job& job) {
    bool own = false;
    buffer_.Clear();  // the last message's bytes were sent
    grpc::SerializationTraits<v1::Job>::Serialize(job, &buffer_, &own);
    std::unique_lock<std::mutex> lock(mu_);
    if (gone_) return false;
    writing_ = true;
    StartWrite(&buffer_);
    cv_.wait(lock, [this] { return !writing_ || gone_; });
    return !gone_;
  }

  // False when the client went away meanwhile.
  bool Sleep() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kWatchPoll, [this] { return gone_; });
    return !gone_;
  }

  store::JobQueue* queue_;
  const std::string owner_;
  std::string run_id_;
  grpc::ByteBuffer buffer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false;
  bool gone_ = false;
};

}  // namespace

absl::StatusOr<v1::Job> QueueService::Describe(const store::QueuedJob& job) {
  ASSIGN_OR_RETURN(QueueView view, ReadView(*queue_));
  return ToWire(*queue_, job, view);
}

absl::StatusOr<v1::Job> QueueService::EnqueueFor(const std::string& owner,
                                                 const v1::EnqueueRequest& request,
                                                 BenchmarkPlan* validated) {
  RETURN_IF_ERROR(Admit(*state_, /*needs_devices=*/false));
  if (!v1::JobPriority_IsValid(request.priority())) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority: ", static_cast<int>(request.priority()), " is not a JobPriority"));
  }
  // Refused now rather than by whichever server claims it: a bad request never waits.
  ASSIGN_OR_RETURN(BenchmarkPlan plan,
                   ValidateBenchmarkRequest(request.benchmark(), state_->suites, state_->limits));
  store::QueuedJob job;
  job.run_id = store::ResultStore::NewRunId();
  job.owner = owner;
  job.priority = request.priority();
  job.suite = plan.suite.name();
  job.request = request.benchmark();
  job.max_attempts = runner_->options().max_attempts;
  // The servers that may claim it: as asked, else the named device's kind, else a GPU where
  // this server has one.
  std::string named_kind;
  if (!request.benchmark().device().empty()) {
    ASSIGN_OR_RETURN(DeviceWorker * d,
                     state_->devices->Find(request.benchmark().device(), "benchmark.device"));
    named_kind = d->backend().kind();
  }
  if (!request.runs_on().empty()) {
    ASSIGN_OR_RETURN(RunsOn runs_on, ParseRunsOn(request.runs_on(), "runs_on"));
    if (!named_kind.empty() && named_kind != runs_on.kind) {
      return absl::InvalidArgumentError(
          absl::StrCat("runs_on: ", runs_on.Text(), " is not the kind of benchmark.device ",
                       Quote(request.benchmark().device()), " (", named_kind, ")"));
    }
    job.device_kind = runs_on.Text();
  } else if (!named_kind.empty()) {
    job.device_kind = named_kind;
  } else {
    job.device_kind = state_->devices->OfKind("cuda").empty() ? "cpu" : "cuda";
  }
  const int limit = runner_->options().max_queued_per_owner;
  if (limit > 0) {
    ASSIGN_OR_RETURN(store::JobQueue::Counts counts, queue_->Count(owner));
    if (counts.queued >= limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "owner '", owner.substr(0, 64), "' already has ", counts.queued,
          " queued jobs, the most one owner may have (--queue-max-per-owner); cancel some or "
          "wait for them"));
    }
  }
  RETURN_IF_ERROR(queue_->Enqueue(job, NowMicros()));
  if (validated != nullptr) *validated = std::move(plan);
  runner_->Wake();
  ASSIGN_OR_RETURN(store::QueuedJob stored, queue_->Get(owner, job.run_id));
  return Describe(stored);
}

grpc::ServerUnaryReactor* QueueService::Enqueue(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  return RawUnary<v1::EnqueueRequest, v1::Job>(
      context, request, response, "Enqueue",
      [this](grpc::CallbackServerContext* ctx, const v1::EnqueueRequest& req, v1::Job* out) {
        absl::StatusOr<v1::Job> job = EnqueueFor(OwnerOfCall(state_->identities, *ctx), req);
        if (job.ok()) *out = *std::move(job);
        return ToGrpcStatus(job.status());
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* QueueService::Watch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  v1::WatchJobRequest req;
  if (grpc::Status s = ParseRawRequest(*request, "Watch", &req); !s.ok()) {
    auto* refused = new WatchRefusal();
    refused->Finish(s);
    return refused;
  }
  return new WatchReactor(queue_, OwnerOfCall(state_->identities, *context), req.run_id());
}

grpc::ServerUnaryReactor* QueueService::Cancel(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return RawUnary<v1::CancelJobRequest, v1::Job>(
      context, request, response, "Cancel",
      [this](grpc::CallbackServerContext* ctx, const v1::CancelJobRequest& req, v1::Job* out) {
        const std::string owner = OwnerOfCall(state_->identities, *ctx);
        absl::StatusOr<store::QueuedJob> job = queue_->Cancel(owner, req.run_id(), NowMicros());
        if (!job.ok()) return ToGrpcStatus(job.status());
        absl::StatusOr<v1::Job> described = Describe(*job);
        if (described.ok()) *out = *std::move(described);
        return ToGrpcStatus(described.status());
      });
}

grpc::ServerUnaryReactor* QueueService::List(grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) {
  return RawUnary<v1::ListJobsRequest, v1::ListJobsResponse>(
      context, request, response, "List",
      [this](grpc::CallbackServerContext* ctx, const v1::ListJobsRequest& req,
             v1::ListJobsResponse* out) -> grpc::Status {
        if (req.limit() > kMaxListLimit) {
          return grpc::Status(
              grpc::StatusCode::INVALID_ARGUMENT,
              absl::StrCat("limit: ", req.limit(), " is more than ", kMaxListLimit));
        }
        const std::string owner = OwnerOfCall(state_->identities, *ctx);
        const std::int64_t within = req.ended_within_seconds() > 0 ? req.ended_within_seconds()
                                                                   : kDefaultEndedWithinSeconds;
        auto jobs = queue_->List(owner, NowMicros(), within * 1000000,
                                 req.limit() > 0 ? req.limit() : kDefaultListLimit);
        if (!jobs.ok()) return ToGrpcStatus(jobs.status());
        absl::StatusOr<QueueView> view = ReadView(*queue_);
        if (!view.ok()) return ToGrpcStatus(view.status());
        for (const store::QueuedJob& job : *jobs) {
          absl::StatusOr<v1::Job> wire = ToWire(*queue_, job, *view);
          if (!wire.ok()) return ToGrpcStatus(wire.status());
          *out->add_jobs() = *std::move(wire);
        }
        absl::StatusOr<store::JobQueue::Counts> counts = queue_->Count(std::nullopt);
        if (!counts.ok()) return ToGrpcStatus(counts.status());
        out->set_queued_total(static_cast<std::uint32_t>(counts->queued));
        out->set_running_total(static_cast<std::uint32_t>(counts->running));
        return grpc::Status::OK;
      });
}

}  // namespace kerneleval::server
