// The end of a gRPC callback-API call, awaited from another thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <utility>

#include <grpcpp/support/status.h>

namespace kerneleval::client {

// A reactor's OnDone calls Done with the call's status; the thread that started the call
// blocks in Wait until then. Done is called once.
class CallCompletion {
 public:
  void Done(grpc::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
    done_ = true;
    cv_.notify_all();
  }
  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

}  // namespace kerneleval::client
