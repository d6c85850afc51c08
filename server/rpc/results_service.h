// kerneleval.v1.Results: the RPC edge of the results store. Validates requests (each error
// names its field, echoed values bounded), maps store errors to gRPC codes, and re-runs
// receipts for Reproduce through the core's Benchmark path (StartBenchmark) as the caller.
#pragma once

#include <memory>

#include <grpcpp/grpcpp.h>

#include "kerneleval/v1/results.grpc.pb.h"
#include "server/core/service_state.h"
#include "server/store/result_store.h"

namespace kerneleval::server {

// Every method is raw (server/grpc/raw_unary.h): a body that does not parse is INVALID_ARGUMENT
// naming the method.
class ResultsService final
    : public v1::Results::WithRawCallbackMethod_History<
          v1::Results::WithRawCallbackMethod_Leaderboard<v1::Results::WithRawCallbackMethod_Compare<
              v1::Results::WithRawCallbackMethod_Reproduce<
                  v1::Results::WithRawCallbackMethod_Export<v1::Results::CallbackService>>>>> {
 public:
  // Each caller sees built-ins' results and its own submissions' (`state->identities`: who a
  // call is); `state->results` is the store. `state` must outlive the service.
  explicit ResultsService(ServiceState* state) : state_(state) {}

  grpc::ServerUnaryReactor* History(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Leaderboard(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Compare(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Reproduce(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;

 private:
  // The methods once parsed.
  grpc::Status DoHistory(grpc::CallbackServerContext* context, const v1::HistoryRequest* request,
                         v1::HistoryResponse* response);
  grpc::Status DoLeaderboard(grpc::CallbackServerContext* context,
                             const v1::LeaderboardRequest* request,
                             v1::LeaderboardResponse* response);
  grpc::Status DoCompare(grpc::CallbackServerContext* context, const v1::CompareRequest* request,
                         v1::CompareResponse* response);
  grpc::Status DoReproduce(grpc::CallbackServerContext* context,
                           const v1::ReproduceRequest* request, v1::ReproduceResponse* response);
  grpc::Status DoExport(grpc::CallbackServerContext* context, const v1::ExportRequest* request,
                        v1::ExportResponse* response);

  ServiceState* state_;
};

}  // namespace kerneleval::server
