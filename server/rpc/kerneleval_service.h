// The RPC edge of kerneleval.v1.KernelEval: the only place that sees grpc::Status. Each
// handler parses, hands the request to the evaluation path (server/core/run_call.h for Run,
// server/core/benchmark_call.h for Benchmark) and answers from the worker thread.
//
// Run and Benchmark take raw bytes and parse them themselves, so that a body that is not the
// request message is answered INVALID_ARGUMENT naming the method (gRPC's own parse failure
// is UNIMPLEMENTED with an empty message).
#pragma once

#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "server/core/service_state.h"
#include "server/grpc/status.h"

namespace kerneleval::server {

class KernelEvalService final
    : public v1::KernelEval::WithRawCallbackMethod_Run<
          v1::KernelEval::WithRawCallbackMethod_Benchmark<v1::KernelEval::CallbackService>> {
 public:
  explicit KernelEvalService(ServiceState* state) : state_(state) {}

  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Benchmark(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ListSuites(grpc::CallbackServerContext* context,
                                       const v1::ListSuitesRequest* request,
                                       v1::ListSuitesResponse* response) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* ListImplementations(grpc::CallbackServerContext* context,
                                                const v1::ListImplementationsRequest* request,
                                                v1::ListImplementationsResponse* response) override;

 private:
  ServiceState* state_;
};

}  // namespace kerneleval::server
