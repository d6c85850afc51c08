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
// Every method takes raw bytes and parses them itself, as KernelEval.Run does: a body that is
// not the method's request is INVALID_ARGUMENT naming the method (gRPC's own parse would
// answer with no message), and ModelInfer's tensor bytes move into the Run without a copy.
// Methods of the protocol's service this front does not serve (ModelConfig, statistics,
// repository, shared memory, streaming) are not in its proto: server/rpc/unserved_methods.h
// answers them with what to use instead.
#pragma once

#include <atomic>

#include <grpcpp/grpcpp.h>

#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "server/core/service_state.h"

namespace kerneleval::server::oip {

using RawOipService = inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        inference::GRPCInferenceService::CallbackService>>>>>>;

class OipService final : public RawOipService {
 public:
  explicit OipService(ServiceState* state) : state_(state) {}

  // Thread-safe.
  void SetLive(bool live) { live_.store(live); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  ServiceState* state_;
  std::atomic<bool> live_{true};
};

}  // namespace kerneleval::server::oip
