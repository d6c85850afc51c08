// kerneleval.v1.Results: the RPC edge of the results store. Validates requests (each error
// names its field, echoed values bounded), maps store errors to gRPC codes, and re-runs
// receipts through this server's own Benchmark RPC for Reproduce.
#pragma once

#include <memory>

#include <grpcpp/grpcpp.h>

#include "kerneleval/v1/results.grpc.pb.h"
#include "server/caller_identity.h"
#include "server/store/result_store.h"

namespace kerneleval::server::store {

class ResultsService final : public v1::Results::Service {
 public:
  // Each caller sees built-ins' results and its own submissions' (`identities`: who a call
  // is; must outlive the service).
  ResultsService(ResultStore* store, const Identities* identities)
      : store_(store), identities_(identities) {}

  // The channel Reproduce runs Benchmark on: the server's in-process channel, so that a
  // re-run takes exactly the path (validation, queues, devices, recording) of any other.
  void SetBenchmarkChannel(std::shared_ptr<grpc::Channel> channel) {
    channel_ = std::move(channel);
  }

  grpc::Status History(grpc::ServerContext* context, const v1::HistoryRequest* request,
                       v1::HistoryResponse* response) override;
  grpc::Status Leaderboard(grpc::ServerContext* context, const v1::LeaderboardRequest* request,
                           v1::LeaderboardResponse* response) override;
  grpc::Status Compare(grpc::ServerContext* context, const v1::CompareRequest* request,
                       v1::CompareResponse* response) override;
  grpc::Status Reproduce(grpc::ServerContext* context, const v1::ReproduceRequest* request,
                         v1::ReproduceResponse* response) override;
  grpc::Status Export(grpc::ServerContext* context, const v1::ExportRequest* request,
                      v1::ExportResponse* response) override;

 private:
  ResultStore* store_;
  const Identities* identities_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace kerneleval::server::store
