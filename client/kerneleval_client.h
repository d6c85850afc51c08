// A small synchronous client for the kerneleval.v1.KernelEval service, plus the standard
// grpc.health.v1 and server-reflection calls the service exposes.
//
// One channel per client, reused by every call; every call carries a deadline
// (ClientOptions::deadline_seconds from the moment the call starts) and, when a token is set,
// the metadata `authorization: Bearer <token>`. Methods return the RPC's grpc::Status; the
// client never retries. Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

namespace v1 = ::kerneleval::v1;

struct ClientOptions {
  std::string target = "localhost:50051";        // HOST:PORT, or any gRPC target URI.
  double deadline_seconds = 300;                 // Per call; for Benchmark, the whole stream.
  int64_t max_message_bytes = int64_t{1} << 30;  // Send and receive limit (clamped to 2 GiB-1).
  std::string bearer_token;                      // Empty = no authorization metadata.
  bool tls = false;
  std::string tls_ca_file;      // PEM roots; empty = the system roots.
  std::string tls_cert_file;    // PEM client certificate chain (mutual TLS), with
  std::string tls_key_file;     // its PEM private key.
  std::string tls_server_name;  // Overrides the name checked against the server certificate.
};

// Builds the channel `options` describe. Fails with INVALID_ARGUMENT when a TLS file cannot
// be read, a deadline is not positive or only one of the client cert / key is given.
grpc::Status MakeChannel(const ClientOptions& options, std::shared_ptr<grpc::Channel>* channel);

// A call's context as every client of the server makes it: the options' deadline from now,
// and the bearer token when one is set.
std::unique_ptr<grpc::ClientContext> NewCallContext(const ClientOptions& options);

// Lets another thread cancel a call in flight: the CLI's Ctrl-C watcher calls Cancel(), which
// TryCancel()s the attached context (or the next one attached, at once). Thread-safe.
class CallCanceller {
 public:
  void Cancel();
  bool cancelled() const;
  // While a call runs, its context is attached; Detach() before the context dies.
  void Attach(grpc::ClientContext* context);
  void Detach();

 private:
  mutable std::mutex mu_;
  grpc::ClientContext* context_ = nullptr;
  bool cancelled_ = false;
};

class KernelEvalClient {
 public:
  // Creates a client with its own channel; see MakeChannel for the errors.
  static grpc::Status Create(const ClientOptions& options,
                             std::unique_ptr<KernelEvalClient>* client);
  // Uses an existing channel (an in-process server in tests, for instance); the channel
  // fields of `options` are ignored, the deadline and token are used.
  KernelEvalClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  const ClientOptions& options() const { return options_; }

  // Waits up to `seconds` for the channel to connect, letting gRPC's reconnect backoff retry
  // a failed attempt. False when no connection came; a call made then fails fast with the
  // channel's last error.
  bool WaitForConnection(double seconds) const;

  grpc::Status Run(const v1::RunRequest& request, v1::RunResponse* response) const;

  // Reads the event stream synchronously, calling `on_event` for every event in order on the
  // calling thread. Returns the stream's status; a stream that ends OK without a report is
  // reported as INTERNAL (the contract promises exactly one).
  // `canceller` (may be null) cancels the stream from another thread: the status is then
  // CANCELLED, after the events received so far.
  grpc::Status Benchmark(const v1::BenchmarkRequest& request,
                         const std::function<void(const v1::BenchmarkEvent&)>& on_event,
                         CallCanceller* canceller = nullptr) const;

  grpc::Status ListSuites(v1::ListSuitesResponse* response) const;
  grpc::Status ListDevices(v1::ListDevicesResponse* response) const;
  // `device` empty = every device.
  grpc::Status ListImplementations(const std::string& device,
                                   v1::ListImplementationsResponse* response) const;

  // grpc.health.v1.Health/Check. `service` empty = the server as a whole. `*serving` is true
  // only for SERVING; an unknown service name is the server's NOT_FOUND.
  grpc::Status HealthCheck(const std::string& service, bool* serving) const;

  // grpc.reflection.v1alpha.ServerReflection list_services: the full names of the services
  // the server exposes, in the server's order.
  grpc::Status ListReflectionServices(std::vector<std::string>* services) const;

 private:
  // A context with the deadline and the authorization metadata applied.
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  std::shared_ptr<grpc::Channel> channel_;
  ClientOptions options_;
  std::unique_ptr<v1::KernelEval::Stub> stub_;
  std::unique_ptr<grpc::GenericStub> generic_stub_;
};

}  // namespace kerneleval::client
