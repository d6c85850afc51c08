#include "server/rpc/kerneleval_service.h"

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
#include "server/core/admission.h"
#include "server/core/benchmark_call.h"
#include "server/core/caller_of.h"
#include "server/core/run_call.h"

namespace kerneleval::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
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

// Server-streaming Benchmark: StartBenchmark's started event, its progress events and then its
// report, written one at a time in order, then the status. Everything else is the call's
// (benchmark_call.h).
class BenchmarkReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  BenchmarkReactor(ServiceState* state, grpc::CallbackServerContext* context,
                   const grpc::ByteBuffer* request_bytes)
      : state_(state), t0_(Clock::now()) {
    state_->metrics->RpcStarted("Benchmark");
    received_ = request_bytes->Length();
    grpc::ByteBuffer copy = *request_bytes;  // shares the slices
    v1::BenchmarkRequest request;
    absl::Status started = ParseRequest(&copy, "Benchmark", &request);
    if (started.ok()) {
      BenchmarkCallbacks callbacks;
      callbacks.on_started = [this](const v1::BenchmarkStarted& started) {
        v1::BenchmarkEvent e;
        *e.mutable_started() = started;
        Enqueue(e);
      };
      callbacks.on_progress = [this](const v1::BenchmarkProgress& p) {
        v1::BenchmarkEvent e;
        *e.mutable_progress() = p;
        Enqueue(e);
      };
      callbacks.done = [this](absl::StatusOr<v1::BenchmarkReport> report) {
        Done(std::move(report));
      };
      absl::StatusOr<std::shared_ptr<BenchmarkCall>> call =
          state_->benchmark_through_queue
              ? state_->benchmark_through_queue(CallerOf(*state_, context), std::move(request),
                                                std::move(callbacks))
              : StartBenchmark(*state_, CallerOf(*state_, context), std::move(request),
                               std::move(callbacks));
      std::lock_guard<std::mutex> lock(mu_);
      if (call.ok()) {
        call_ = *std::move(call);
        if (cancelled_) call_->Cancel();
      }
      started = call.status();
    }
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
      CancelLocked();
      pending_writes_.clear();
    } else {
      pending_writes_.pop_front();
    }
    WriteNextLocked();
    MaybeFinishLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    CancelLocked();
  }

  void OnDone() override {
    state_->metrics->RpcFinished("Benchmark", CodeName(final_status_.error_code()),
                                 SecondsSince(t0_), received_, sent_);
    delete this;
  }

 private:
  void CancelLocked() {
    cancelled_ = true;
    if (call_ != nullptr) call_->Cancel();
  }

  void Done(absl::StatusOr<v1::BenchmarkReport> report) {
    v1::BenchmarkEvent e;
    if (report.ok()) *e.mutable_report() = *std::move(report);
    std::lock_guard<std::mutex> lock(mu_);
    final_status_ = ToGrpcStatus(report.status());
    if (report.ok() && !cancelled_) {
      pending_writes_.push_back(Serialize(e));
      WriteNextLocked();
    }
    finishing_ = true;
    MaybeFinishLocked();
  }

  void Enqueue(const v1::BenchmarkEvent& e) {
    grpc::ByteBuffer bytes = Serialize(e);
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
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
  const Clock::time_point t0_;
  std::size_t received_ = 0;
  std::size_t sent_ = 0;

  std::mutex mu_;
  std::shared_ptr<BenchmarkCall> call_;
  bool cancelled_ = false;
  std::deque<grpc::ByteBuffer> pending_writes_;  // front() is in flight while writing_
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;
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
