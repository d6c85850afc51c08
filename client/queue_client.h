// A small synchronous client for kerneleval.v1.Queue (enqueue, watch, cancel, list), on the
// same channel rules as KernelEvalClient: a deadline per call (Watch: the whole stream) and the
// bearer token as `authorization` metadata. Thread-safety: methods may run concurrently.
#pragma once

#include <functional>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "client/kerneleval_client.h"
#include "kerneleval/v1/queue.grpc.pb.h"

namespace kerneleval::client {

class QueueClient {
 public:
  QueueClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  grpc::Status Enqueue(const v1::EnqueueRequest& request, v1::Job* job) const;
  // Calls `on_job` for each state the server sends, the last one the job's end; `canceller`
  // (may be null) stops the stream from another thread.
  grpc::Status Watch(const std::string& run_id, const std::function<void(const v1::Job&)>& on_job,
                     CallCanceller* canceller = nullptr) const;
  grpc::Status Cancel(const std::string& run_id, v1::Job* job) const;
  grpc::Status List(const v1::ListJobsRequest& request, v1::ListJobsResponse* response) const;

 private:
  ClientOptions options_;
  std::unique_ptr<v1::Queue::Stub> stub_;
};

}  // namespace kerneleval::client
