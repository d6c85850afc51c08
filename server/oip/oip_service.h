// The Open Inference Protocol (KServe v2) front, inference.GRPCInferenceService, on the same
// server and port as kerneleval.v1.KernelEval and behind the same token check. A thin
// translation (infer_translation.h) onto the Run path: ModelInfer is validated, queued,
// measured and checked by StartRun exactly as KernelEval.Run is, so its errors carry the
// same codes and field names, and its calls count in the same metrics (method label = the
// RPC's name).
//
// Readiness agrees with grpc.health.v1: ServerReady is the "readiness" service's status
// (ServiceState::ready, off while draining); ServerLive is the "" service's, which the
// server turns off through SetLive() when a device cannot be recovered.
//
// ModelInfer takes raw bytes and parses them itself, as KernelEval.Run does: a body that is
// not a ModelInferRequest is INVALID_ARGUMENT naming the method, and the tensors' bytes move
// into the Run without a copy.
#pragma once

#include <atomic>

#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "server/service_state.h"

namespace kerneleval::server::oip {

class OipService final : public inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                             inference::GRPCInferenceService::CallbackService> {
 public:
  explicit OipService(ServiceState* state) : state_(state) {}

  // Thread-safe.
  void SetLive(bool live) { live_.store(live); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  ServiceState* state_;
  std::atomic<bool> live_{true};
};

}  // namespace kerneleval::server::oip
