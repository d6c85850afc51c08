#include "server/oip/oip_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/core/admission.h"
#include "server/core/caller_of.h"
#include "server/core/run_call.h"
#include "server/evaluation/server_version.h"
#include "server/grpc/raw_unary.h"
#include "server/grpc/status.h"
#include "server/oip/infer_translation.h"
#include "server/oip/oip_models.h"

namespace kerneleval::server::oip {
namespace {

using Clock = std::chrono::steady_clock;

// Counts the call in the metrics the KernelEval RPCs use, then finishes it.
class CountedCall {
 public:
  CountedCall(ServiceState* state, grpc::CallbackServerContext* context, const char* method)
      : state_(state), reactor_(context->DefaultReactor()), method_(method) {
    state_->metrics->RpcStarted(method_);
  }

  grpc::ServerUnaryReactor* Finish(const absl::Status& status, std::size_t received,
                                   std::size_t sent) {
    const grpc::Status s = ToGrpcStatus(status);
    state_->metrics->RpcFinished(method_, absl::StatusCodeToString(status.code()),
                                 std::chrono::duration<double>(Clock::now() - t0_).count(),
                                 received, s.ok() ? sent : 0);
    reactor_->Finish(s);
    return reactor_;
  }

  grpc::ServerUnaryReactor* reactor() const { return reactor_; }

 private:
  ServiceState* state_;
  grpc::ServerUnaryReactor* reactor_;
  const char* method_;
  Clock::time_point t0_ = Clock::now();
};

// A small method on raw bytes: parses `bytes` as `Request` (INVALID_ARGUMENT naming `method`
// when it is not one), runs `handler`, counts the call and answers on gRPC's thread.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* CountedRawUnary(
    ServiceState* state, grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes,
    grpc::ByteBuffer* response_bytes, const char* method,
    const std::function<absl::Status(const Request&, Response*)>& handler) {
  CountedCall call(state, context, method);
  Request request;
  Response response;
  const std::size_t received = bytes->Length();
  if (grpc::Status parsed = ParseRawRequest(*bytes, method, &request); !parsed.ok()) {
    return call.Finish(
        absl::Status(static_cast<absl::StatusCode>(parsed.error_code()), parsed.error_message()),
        received, 0);
  }
  absl::Status s = handler(request, &response);
  std::size_t sent = 0;
  if (s.ok()) {
    bool own = false;
    // Serializing a message this server built cannot fail but for size, far below any limit.
    (void)grpc::SerializationTraits<Response>::Serialize(response, response_bytes, &own);
    sent = response_bytes->Length();
  }
  return call.Finish(s, received, sent);
}

void DescribeTensor(const char* name, int rank,
                    inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(name);
  // One datatype per tensor is all the metadata can say: BF16, the operation's reference
  // dtype (FlashInfer-Bench's fused_add_rmsnorm_h2048). FP16 and FP32 are taken as well.
  out->set_datatype(DatatypeName(v1::DTYPE_BF16));
  for (int i = 0; i < rank; ++i) out->add_shape(-1);
}

// A ModelInfer in flight: the parsed request, the Run made from it and its answer, kept
// until the Run's `done` has run.
struct InferCall {
  explicit InferCall(ServiceState* state, grpc::CallbackServerContext* context)
      : counted(state, context, "ModelInfer") {}
  CountedCall counted;
  std::size_t received = 0;
  inference::ModelInferRequest request;
  InferPlan plan;
  v1::RunResponse run_response;
};

absl::Status PrepareInfer(ServiceState& state, const grpc::ByteBuffer& bytes, InferCall* call) {
  if (grpc::Status parsed = ParseRawRequest(bytes, "ModelInfer", &call->request); !parsed.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(parsed.error_code()), parsed.error_message());
  }
  if (absl::Status s = Admit(state, /*needs_devices=*/true); !s.ok()) return s;
  absl::StatusOr<Model> model =
      FindModel(state, call->request.model_name(), call->request.model_version(), "model_name",
                "model_version");
  if (!model.ok()) return model.status();
  absl::StatusOr<InferPlan> plan = TranslateRequest(*model, &call->request);
  if (!plan.ok()) return plan.status();
  call->plan = std::move(*plan);
  v1::RunRequest& run = call->plan.run;
  if (run.device().empty() && !model->device_kind.empty()) {
    // The model names an implementation that only one kind of device has: the least-loaded
    // device of that kind, where StartRun alone would take the least-loaded of all.
    absl::StatusOr<DeviceWorker*> device = state.devices->LeastLoaded(model->device_kind);
    if (!device.ok()) return device.status();
    run.set_device((*device)->name());
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* OipService::ServerLive(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  return CountedRawUnary<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      state_, context, request, response, "ServerLive",
      [this](const inference::ServerLiveRequest&, inference::ServerLiveResponse* out) {
        out->set_live(live_.load());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OipService::ServerReady(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  return CountedRawUnary<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      state_, context, request, response, "ServerReady",
      [this](const inference::ServerReadyRequest&, inference::ServerReadyResponse* out) {
        out->set_ready(state_->ready.load() && !state_->draining.load());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OipService::ModelReady(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  return CountedRawUnary<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      state_, context, request, response, "ModelReady",
      [this](const inference::ModelReadyRequest& r, inference::ModelReadyResponse* out) {
        // A model the server does not have is not ready (Triton answers the same way):
        // probes get a boolean, ModelMetadata says what exists.
        absl::StatusOr<Model> model = FindModel(*state_, r.name(), r.version(), "name", "version");
        out->set_ready(model.ok() && oip::ModelReady(*state_, *model));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OipService::ServerMetadata(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return CountedRawUnary<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      state_, context, request, response, "ServerMetadata",
      [this](const inference::ServerMetadataRequest&, inference::ServerMetadataResponse* out) {
        if (absl::Status s = Admit(*state_, /*needs_devices=*/false); !s.ok()) return s;
        out->set_name("kerneleval");
        out->set_version(ServerVersion());
        out->add_extensions("parameters");  // request and response parameters
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OipService::ModelMetadata(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return CountedRawUnary<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      state_, context, request, response, "ModelMetadata",
      [this](const inference::ModelMetadataRequest& r, inference::ModelMetadataResponse* out) {
        if (absl::Status s = Admit(*state_, /*needs_devices=*/false); !s.ok()) return s;
        absl::StatusOr<Model> model = FindModel(*state_, r.name(), r.version(), "name", "version");
        if (!model.ok()) return model.status();
        out->set_name(model->name);
        out->add_versions(kModelVersion);
        out->set_platform(model->device_kind.empty()
                              ? std::string("kerneleval")
                              : absl::StrCat("kerneleval_", model->device_kind));
        DescribeTensor("hidden_states", 2, out->add_inputs());
        DescribeTensor("residual", 2, out->add_inputs());
        DescribeTensor("weight", 1, out->add_inputs());
        DescribeTensor("output", 2, out->add_outputs());
        DescribeTensor("residual_out", 2, out->add_outputs());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* OipService::ModelInfer(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  auto call = std::make_shared<InferCall>(state_, context);
  call->received = request->Length();
  grpc::ServerUnaryReactor* reactor = call->counted.reactor();
  auto done = [response, call](const absl::Status& s) {
    std::size_t sent = 0;
    if (s.ok()) {
      inference::ModelInferResponse out;
      TranslateResponse(call->request, call->plan, &call->run_response, &out);
      bool own = false;
      // Serializing a message this server built cannot fail but for size, which the limits
      // bound.
      (void)grpc::SerializationTraits<google::protobuf::Message>::Serialize(out, response, &own);
      sent = response->Length();
    }
    call->counted.Finish(s, call->received, sent);
  };
  if (absl::Status s = PrepareInfer(*state_, *request, call.get()); !s.ok()) {
    done(s);
    return reactor;
  }
  // Models are built-ins only (oip_models.h), but the job is still the caller's: its
  // device-seconds are charged to the caller's owner, as a Run's are.
  Caller caller = CallerOf(*state_, context);
  if (call->plan.timeout.count() > 0) {
    caller.deadline = std::min(
        caller.deadline,
        std::chrono::system_clock::now() +
            std::chrono::duration_cast<std::chrono::system_clock::duration>(call->plan.timeout));
  }
  StartRun(*state_, std::move(caller), call->plan.run, &call->run_response, std::move(done));
  return reactor;
}

}  // namespace kerneleval::server::oip
