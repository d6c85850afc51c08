// The kerneleval server: devices and their workers, the gRPC service with health and
// reflection, and the Prometheus exposer, with readiness after warm-up and a graceful drain.
// Health per device: `kerneleval.v1.KernelEval/<device>` serves while that device takes
// work; readiness while at least one device does; liveness fails only once every device has
// been given up on.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/app/server_options.h"
#include "server/device/backend.h"

namespace kerneleval::server {

class KernelEvalServer {
 public:
  // Builds and starts everything. `backends` empty: created from options.device.
  static absl::StatusOr<std::unique_ptr<KernelEvalServer>> Start(
      const ServerOptions& options, std::vector<std::unique_ptr<Backend>> backends = {});
  ~KernelEvalServer();

  int grpc_port() const;
  int metrics_port() const;  // 0 when metrics are off

  // True once every device's warm-up has ended and readiness is SERVING (at least one device
  // serves).
  bool WaitUntilReady(absl::Duration timeout);

  // Readiness NOT_SERVING, new RPCs UNAVAILABLE, accepted work finishes within `grace`
  // (RPCs still running then are cancelled), workers join. Idempotent.
  void Shutdown(absl::Duration grace);

  struct Impl;

 private:
  explicit KernelEvalServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kerneleval::server
