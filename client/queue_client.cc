#include "client/queue_client.h"

namespace kerneleval::client {

QueueClient::QueueClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)), stub_(v1::Queue::NewStub(std::move(channel))) {}

grpc::Status QueueClient::Enqueue(const v1::EnqueueRequest& request, v1::Job* job) const {
  auto context = NewCallContext(options_);
  return stub_->Enqueue(context.get(), request, job);
}

grpc::Status QueueClient::Watch(const std::string& run_id,
                                const std::function<void(const v1::Job&)>& on_job,
                                CallCanceller* canceller) const {
  auto context = NewCallContext(options_);
  if (canceller != nullptr) canceller->Attach(context.get());
  v1::WatchJobRequest request;
  request.set_run_id(run_id);
  auto reader = stub_->Watch(context.get(), request);
  v1::Job job;
  while (reader->Read(&job)) on_job(job);
  grpc::Status status = reader->Finish();
  if (canceller != nullptr) canceller->Detach();
  return status;
}

grpc::Status QueueClient::Cancel(const std::string& run_id, v1::Job* job) const {
  auto context = NewCallContext(options_);
  v1::CancelJobRequest request;
  request.set_run_id(run_id);
  return stub_->Cancel(context.get(), request, job);
}

grpc::Status QueueClient::List(const v1::ListJobsRequest& request,
                               v1::ListJobsResponse* response) const {
  auto context = NewCallContext(options_);
  return stub_->List(context.get(), request, response);
}

}  // namespace kerneleval::client
