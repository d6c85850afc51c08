// kerneleval.v1.Queue: the RPC edge of the verdict queue (server/store/job_queue.h). Any server
// of a fleet answers for every job, whichever server runs it: Enqueue validates as Benchmark
// would and answers at once; Watch follows the job's row until it ends; Cancel and List act on
// the caller's own jobs only (another owner's job is NOT_FOUND, as if it did not exist).
#pragma once

#include <grpcpp/grpcpp.h>

#include "kerneleval/v1/queue.grpc.pb.h"
#include "server/evaluation/benchmark_plan.h"
#include "server/queue/queue_runner.h"
#include "server/store/job_queue.h"

namespace kerneleval::server {

// Every method is raw (server/grpc/raw_unary.h): a body that does not parse is INVALID_ARGUMENT
// naming the method.
class QueueService final
    : public v1::Queue::WithRawCallbackMethod_Enqueue<
          v1::Queue::WithRawCallbackMethod_Watch<v1::Queue::WithRawCallbackMethod_Cancel<
              v1::Queue::WithRawCallbackMethod_List<v1::Queue::CallbackService>>>> {
 public:
  // All must outlive the service.
  QueueService(ServiceState* state, store::JobQueue* queue, QueueRunner* runner)
      : state_(state), queue_(queue), runner_(runner) {}

  grpc::ServerUnaryReactor* Enqueue(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;

  // The job as the wire shows it to its owner: with its position and estimated start while
  // queued.
  absl::StatusOr<v1::Job> Describe(const store::QueuedJob& job);

  // Enqueue for `owner`, as the RPC does it: validated as Benchmark would, then queued;
  // `plan`, when given, receives what the validation resolved.
  absl::StatusOr<v1::Job> EnqueueFor(const std::string& owner, const v1::EnqueueRequest& request,
                                     BenchmarkPlan* plan = nullptr);
  store::JobQueue& queue() { return *queue_; }

 private:
  ServiceState* state_;
  store::JobQueue* queue_;
  QueueRunner* runner_;
};

}  // namespace kerneleval::server
