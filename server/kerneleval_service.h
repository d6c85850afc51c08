// The RPC edge: the only place that sees grpc::Status. Each handler validates, picks a
// device, queues a job on its worker and answers from the worker thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "server/device_set.h"
#include "server/metrics.h"
#include "server/request_validation.h"

namespace kerneleval::server {

struct ServiceState {
  DeviceSet* devices = nullptr;
  std::vector<v1::SuiteDefinition> suites;  // loaded at start
  Metrics* metrics = nullptr;
  RequestLimits limits;
  std::atomic<bool> ready{false};
  // Every device has warmed up: work is admitted from then on. Readiness also drops while
  // a device recovers from a fault, but healthy devices keep serving meanwhile.
  std::atomic<bool> warmed{false};
  std::atomic<bool> draining{false};
};

class KernelEvalService final : public v1::KernelEval::CallbackService {
 public:
  explicit KernelEvalService(ServiceState* state) : state_(state) {}

  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, const v1::RunRequest* request,
                                v1::RunResponse* response) override;
  grpc::ServerWriteReactor<v1::BenchmarkEvent>* Benchmark(
      grpc::CallbackServerContext* context, const v1::BenchmarkRequest* request) override;
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

// absl::Status -> grpc::Status; the codes share their numbering.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace kerneleval::server
