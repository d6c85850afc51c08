#include "client/results_client.h"

#include <chrono>

namespace kerneleval::client {

ResultsClient::ResultsClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)), stub_(v1::Results::NewStub(channel)) {}

std::unique_ptr<grpc::ClientContext> ResultsClient::NewContext() const {
  return NewCallContext(options_);
}

grpc::Status ResultsClient::History(const v1::HistoryRequest& request,
                                    v1::HistoryResponse* response) const {
  return stub_->History(NewContext().get(), request, response);
}

grpc::Status ResultsClient::Leaderboard(const v1::LeaderboardRequest& request,
                                        v1::LeaderboardResponse* response) const {
  return stub_->Leaderboard(NewContext().get(), request, response);
}

grpc::Status ResultsClient::Compare(const v1::CompareRequest& request,
                                    v1::CompareResponse* response) const {
  return stub_->Compare(NewContext().get(), request, response);
}

grpc::Status ResultsClient::Reproduce(const v1::ReproduceRequest& request,
                                      v1::ReproduceResponse* response) const {
  return stub_->Reproduce(NewContext().get(), request, response);
}

grpc::Status ResultsClient::Export(const v1::ExportRequest& request,
                                   v1::ExportResponse* response) const {
  return stub_->Export(NewContext().get(), request, response);
}

}  // namespace kerneleval::client
