#include "server/kerneleval_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/admission.h"
#include "server/benchmark_engine.h"
#include "server/run_call.h"

namespace kerneleval::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

Caller CallerOf(const ServiceState& state, grpc::CallbackServerContext* context) {
  Caller caller;
  if (state.identities != nullptr) caller.owner = state.identities->CallerOwner(*context);
  caller.deadline = context->deadline();
  caller.cancelled = [context] { return context->IsCancelled(); };
  return caller;
}

// Run and Benchmark take their request as bytes and parse it here: a body that is not the
// message then gets INVALID_ARGUMENT naming the method, where gRPC's own parse would answer
// UNIMPLEMENTED with no message.
template <typename Message>
absl::Status ParseRequest(grpc::ByteBuffer* bytes, const char* method, Message* out) {
  grpc::ProtoBufferReader reader(bytes);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    LogClientFault(absl::StrCat(method, ": request body does not parse"));
    return absl::InvalidArgumentError(
        absl::StrCat(method, ": the request body does not parse as ", out->GetTypeName(),
                     " (malformed bytes, or a string field that is not valid UTF-8)"));
  }
  return absl::OkStatus();
}

grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  grpc::ByteBuffer bytes;
  bool own = false;
  // Serializing a message this server built cannot fail but for size, which the limits bound.
  (void)grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, &bytes, &own);
  return bytes;
}

// A Run in flight: the parsed request and the response the job fills, kept until it ends.
struct RunCall {
  Clock::time_point t0 = Clock::now();
  std::size_t received = 0;
  v1::RunRequest request;
  v1::RunResponse response;
};

// Server-streaming Benchmark: device jobs push progress events; writes go out one at a
// time in order; the report goes last, then the status.
class BenchmarkReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  BenchmarkReactor(ServiceState* state, grpc::CallbackServerContext* context,
                   const grpc::ByteBuffer* request_bytes)
      : state_(state), context_(context), caller_(CallerOf(*state, context)), t0_(Clock::now()) {
    state_->metrics->RpcStarted("Benchmark");
    received_ = request_bytes->Length();
    grpc::ByteBuffer copy = *request_bytes;  // shares the slices
    absl::Status started = ParseRequest(&copy, "Benchmark", &request_);
    if (started.ok()) started = Start();
    if (!started.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      final_status_ = ToGrpcStatus(started);
      finishing_ = true;
      MaybeFinishLocked();
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      // The client went away: stop the device jobs and drop what is queued.
      cancelled_.store(true);
      pending_writes_.clear();
    } else {
      pending_writes_.pop_front();
    }
    WriteNextLocked();
    MaybeFinishLocked();
  }

  void OnCancel() override { cancelled_.store(true); }

  void OnDone() override {
    state_->metrics->RpcFinished("Benchmark", CodeName(final_status_.error_code()),
                                 SecondsSince(t0_), received_, sent_);
    delete this;
  }

 private:
  // Validate, choose the devices, queue one job per device.
  absl::Status Start() {
    RETURN_IF_ERROR(Admit(*state_, /*needs_devices=*/true));
    ASSIGN_OR_RETURN(plan_, ValidateBenchmarkRequest(request_, state_->suites, state_->limits));
    ASSIGN_OR_RETURN(std::vector<DeviceWorker*> devices, ChooseDevices());
    for (DeviceWorker* d : devices) {
      const Backend& backend = d->backend();
      if (plan_.protocol.cuda_graph() && !backend.IsGpu()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "protocol.cuda_graph: graph replay needs a CUDA device, not ", backend.name()));
      }
      if (plan_.protocol.check_every_call() && !backend.IsGpu()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "protocol.check_every_call: calls are checked on CUDA devices, not ", backend.name()));
      }
      RETURN_IF_ERROR(CheckTimerFits(plan_.protocol.timer(), backend, "protocol.timer"));
      for (int i = 0; i < request_.implementations_size(); ++i) {
        ASSIGN_OR_RETURN(
            ResolvedImplementation resolved,
            ResolveImplementation(*state_, caller_, backend, request_.implementations(i),
                                  absl::StrCat("implementations[", i, "]")));
        if (resolved.submission) {
          plan_.submissions[request_.implementations(i)] = {resolved.name,
                                                            std::move(*resolved.submission)};
        }
      }
    }
    if (!plan_.submissions.empty()) {
      // Submitted kernels run with every call checked; the built-ins ranked beside them get
      // the same device work between calls, and the report's protocol says so.
      plan_.protocol.set_check_every_call(true);
    }
    RETURN_IF_ERROR(StillWanted(caller_, "before it was queued"));

    runs_.resize(devices.size());
    pending_jobs_ = devices.size();
    for (std::size_t i = 0; i < devices.size(); ++i) {
      BenchmarkPlan plan = plan_;
      plan.host_preparation = state_->host_preparation;
      if (request_.implementations_size() > 0) {
        plan.implementations.assign(request_.implementations().begin(),
                                    request_.implementations().end());
      } else {
        for (const auto& impl : devices[i]->backend().Implementations()) {
          if (!impl.test_only()) plan.implementations.push_back(impl.name());
        }
      }
      const absl::Status submitted = devices[i]->Submit(
          [this, i, plan = std::move(plan)](Backend& backend, double queue_seconds) {
            BenchmarkOnWorker(backend, queue_seconds, i, plan);
          });
      if (!submitted.ok()) {
        // Jobs already accepted still run (they stop at once) and finish the RPC.
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_.store(true);
        final_status_ = ToGrpcStatus(submitted);
        pending_jobs_ -= devices.size() - i;
        if (pending_jobs_ > 0) return absl::OkStatus();
        return submitted;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<DeviceWorker*>> ChooseDevices() const {
    const v1::BenchmarkRequest& req = request_;
    if (req.all_devices()) {
      std::string kind = "cuda";
      if (!req.device().empty()) {
        ASSIGN_OR_RETURN(DeviceWorker * d, state_->devices->Find(req.device(), "device"));
        kind = d->backend().kind();
      } else if (state_->devices->OfKind("cuda").empty()) {
        kind = "cpu";
      }
      return state_->devices->OfKind(kind);
    }
    if (!req.device().empty()) {
      ASSIGN_OR_RETURN(DeviceWorker * d, state_->devices->FindHealthy(req.device(), "device"));
      return std::vector<DeviceWorker*>{d};
    }
    ASSIGN_OR_RETURN(DeviceWorker * d, state_->devices->LeastLoaded());
    return std::vector<DeviceWorker*>{d};
  }

  bool ShouldStop() const {
    return cancelled_.load() || caller_.Cancelled() ||
           Clock::now().time_since_epoch().count() >= cap_ticks_.load() || caller_.DeadlinePassed();
  }

  // The time cap counts from the first device that starts: time spent queued behind other
  // work is not the benchmark's (the client's deadline covers the wait).
  void StartCapClock() {
    std::call_once(cap_started_, [this] {
      const auto cap = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(plan_.protocol.max_total_seconds()));
      cap_ticks_.store((Clock::now() + cap).time_since_epoch().count());
    });
  }

  // On the device's worker thread.
  void BenchmarkOnWorker(Backend& backend, double queue_seconds, std::size_t index,
                         const BenchmarkPlan& plan) {
    state_->metrics->ObserveQueueWait(backend.name(), queue_seconds);
    if (absl::Status s = StillWanted(caller_, InQueueOf(backend, queue_seconds)); !s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_.store(true);  // jobs on other devices stop too
      if (final_status_.ok()) final_status_ = ToGrpcStatus(s);
      if (--pending_jobs_ == 0) FinishReportLocked();
      return;
    }
    StartCapClock();
    const auto t0 = Clock::now();
    DeviceRun run = BenchmarkOnDevice(
        backend, plan,
        [this](const v1::BenchmarkProgress& p) {
          v1::BenchmarkEvent e;
          *e.mutable_progress() = p;
          Enqueue(std::move(e));
        },
        [this] { return ShouldStop(); },
        [this, &backend](const std::string& impl, const std::vector<double>& samples) {
          state_->metrics->ObserveKernelSamples(impl, backend.name(), samples);
        });
    state_->metrics->ObserveCompute(backend.name(), SecondsSince(t0));
    std::lock_guard<std::mutex> lock(mu_);
    runs_[index] = std::move(run);
    if (--pending_jobs_ == 0) FinishReportLocked();
  }

  void FinishReportLocked() {
    if (!final_status_.ok()) {
      finishing_ = true;
      MaybeFinishLocked();
      return;
    }
    v1::BenchmarkEvent e;
    v1::BenchmarkReport* report = e.mutable_report();
    report->set_suite(plan_.suite.name());
    *report->mutable_definition() = plan_.suite;
    *report->mutable_protocol() = plan_.protocol;
    std::vector<v1::WorkloadResult> results;
    bool complete = true;
    for (DeviceRun& run : runs_) {
      for (v1::WorkloadResult& r : run.results) results.push_back(std::move(r));
      *report->add_environments() = run.environment;
      complete = complete && run.complete;
    }
    for (const v1::ImplementationSummary& s : RankResults(&results)) *report->add_summaries() = s;
    for (v1::WorkloadResult& r : results) *report->add_results() = std::move(r);
    report->set_complete(complete);
    report->set_wall_seconds(SecondsSince(t0_));
    // Queued for the store's writer thread: the device worker does not wait for the disk.
    if (state_->results != nullptr) state_->results->Record(*report, caller_.owner);
    if (plan_.named_suite) {
      state_->metrics->RecordReport(*report,
                                    absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    }
    if (caller_.DeadlinePassed()) {
      final_status_ = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                   "deadline passed while the benchmark ran; stopped early");
    } else if (cancelled_.load() || caller_.Cancelled()) {
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "benchmark cancelled");
    } else {
      pending_writes_.push_back(Serialize(e));
      WriteNextLocked();
    }
    finishing_ = true;
    MaybeFinishLocked();
  }

  void Enqueue(const v1::BenchmarkEvent& e) {
    grpc::ByteBuffer bytes = Serialize(e);
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_.load()) return;
    pending_writes_.push_back(std::move(bytes));
    WriteNextLocked();
  }

  void WriteNextLocked() {
    if (writing_ || pending_writes_.empty()) return;
    writing_ = true;
    sent_ += pending_writes_.front().Length();
    StartWrite(&pending_writes_.front());
  }

  void MaybeFinishLocked() {
    if (finishing_ && !finished_ && !writing_ && pending_writes_.empty()) {
      finished_ = true;
      Finish(final_status_);
    }
  }

  ServiceState* state_;
  grpc::CallbackServerContext* context_;
  const Caller caller_;
  v1::BenchmarkRequest request_;
  const Clock::time_point t0_;
  std::once_flag cap_started_;
  std::atomic<Clock::rep> cap_ticks_{Clock::time_point::max().time_since_epoch().count()};
  std::size_t received_ = 0;
  std::size_t sent_ = 0;
  BenchmarkPlan plan_;
  std::atomic<bool> cancelled_{false};

  std::mutex mu_;
  std::deque<grpc::ByteBuffer> pending_writes_;  // front() is in flight while writing_
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  std::size_t pending_jobs_ = 0;
  std::vector<DeviceRun> runs_;
  grpc::Status final_status_;
};

// Finishes a unary RPC and records it.
void FinishUnary(ServiceState* state, grpc::ServerUnaryReactor* reactor, const char* method,
                 const grpc::Status& status, Clock::time_point t0, std::size_t received,
                 std::size_t sent) {
  state->metrics->RpcFinished(method, CodeName(status.error_code()), SecondsSince(t0), received,
                              status.ok() ? sent : 0);
  reactor->Finish(status);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* KernelEvalService::Run(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  auto call = std::make_shared<RunCall>();
  state_->metrics->RpcStarted("Run");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  call->received = request->Length();
  grpc::ByteBuffer copy = *request;  // shares the slices
  ServiceState* state = state_;
  auto done = [state, reactor, response, call](const absl::Status& s) {
    if (s.ok()) *response = Serialize(call->response);
    FinishUnary(state, reactor, "Run", ToGrpcStatus(s), call->t0, call->received,
                s.ok() ? response->Length() : 0);
  };
  if (absl::Status s = ParseRequest(&copy, "Run", &call->request); !s.ok()) {
    done(s);
    return reactor;
  }
  StartRun(*state_, CallerOf(*state_, context), call->request, &call->response, std::move(done));
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* KernelEvalService::Benchmark(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new BenchmarkReactor(state_, context, request);
}

grpc::ServerUnaryReactor* KernelEvalService::ListSuites(grpc::CallbackServerContext* context,
                                                        const v1::ListSuitesRequest* request,
                                                        v1::ListSuitesResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("ListSuites");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status s = Admit(*state_, /*needs_devices=*/false);
  if (s.ok()) {
    for (const v1::SuiteDefinition& suite : state_->suites) *response->add_suites() = suite;
  }
  FinishUnary(state_, reactor, "ListSuites", ToGrpcStatus(s), t0, request->ByteSizeLong(),
              response->ByteSizeLong());
  return reactor;
}

grpc::ServerUnaryReactor* KernelEvalService::ListDevices(grpc::CallbackServerContext* context,
                                                         const v1::ListDevicesRequest* request,
                                                         v1::ListDevicesResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("ListDevices");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status s = Admit(*state_, /*needs_devices=*/false);
  if (s.ok()) {
    for (const auto& w : state_->devices->workers()) {
      v1::Device d = w->backend().Describe();
      d.set_healthy(w->backend().Healthy());
      d.set_queue_depth(static_cast<std::uint32_t>(w->load()));
      d.set_queue_capacity(static_cast<std::uint32_t>(w->capacity()));
      *response->add_devices() = std::move(d);
    }
  }
  FinishUnary(state_, reactor, "ListDevices", ToGrpcStatus(s), t0, request->ByteSizeLong(),
              response->ByteSizeLong());
  return reactor;
}

grpc::ServerUnaryReactor* KernelEvalService::ListImplementations(
    grpc::CallbackServerContext* context, const v1::ListImplementationsRequest* request,
    v1::ListImplementationsResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("ListImplementations");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status s = Admit(*state_, /*needs_devices=*/false);
  if (s.ok()) {
    std::vector<DeviceWorker*> devices;
    if (request->device().empty()) {
      for (const auto& w : state_->devices->workers()) devices.push_back(w.get());
    } else {
      absl::StatusOr<DeviceWorker*> d = state_->devices->Find(request->device(), "device");
      if (d.ok()) {
        devices.push_back(*d);
      } else {
        s = d.status();
      }
    }
    std::vector<std::string> seen;
    for (DeviceWorker* d : devices) {
      for (const v1::Implementation& impl : d->backend().Implementations()) {
        // A submission is its owner's to see, through the Submissions service.
        if (IsSubmissionId(impl.name())) continue;
        if (std::find(seen.begin(), seen.end(), impl.name()) != seen.end()) continue;
        seen.push_back(impl.name());
        *response->add_implementations() = impl;
      }
    }
  }
  FinishUnary(state_, reactor, "ListImplementations", ToGrpcStatus(s), t0, request->ByteSizeLong(),
              response->ByteSizeLong());
  return reactor;
}

}  // namespace kerneleval::server
