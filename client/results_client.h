// A small synchronous client for kerneleval.v1.Results (history, leaderboard, compare,
// reproduce, export), on the same channel rules as KernelEvalClient: a deadline per call and
// the bearer token as `authorization` metadata. Thread-safety: methods may run concurrently.
#pragma once

#include <memory>

#include <grpcpp/grpcpp.h>

#include "client/kerneleval_client.h"
#include "kerneleval/v1/results.grpc.pb.h"

namespace kerneleval::client {

class ResultsClient {
 public:
  ResultsClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  grpc::Status History(const v1::HistoryRequest& request, v1::HistoryResponse* response) const;
  grpc::Status Leaderboard(const v1::LeaderboardRequest& request,
                           v1::LeaderboardResponse* response) const;
  grpc::Status Compare(const v1::CompareRequest& request, v1::CompareResponse* response) const;
  grpc::Status Reproduce(const v1::ReproduceRequest& request,
                         v1::ReproduceResponse* response) const;
  grpc::Status Export(const v1::ExportRequest& request, v1::ExportResponse* response) const;

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  ClientOptions options_;
  std::unique_ptr<v1::Results::Stub> stub_;
};

}  // namespace kerneleval::client
