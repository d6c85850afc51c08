// A backend whose device lives in a child process, kerneleval-device-host. A sticky CUDA
// fault poisons every context of the process that hit it, and on current drivers not even
// cudaDeviceReset() brings the device back to that process. So the server keeps no CUDA
// context of its own: each device runs in a host process, and after a fault, a crash or a
// hang the host is killed and a new one started. The caller of the failing call gets a
// clear error; queued work waits for the new host (DeviceWorker::RecoverDevice).
//
// Tensors cross in a shared memory region (one copy each way on the host side); timing
// happens inside the host, so measurements are the same as in-process ones.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kerneleval/internal/device_host.pb.h"
#include "server/device/backend.h"
#include "server/device/device_host_channel.h"

namespace kerneleval::server {

struct DeviceHostOptions {
  std::string executable;  // path of kerneleval-device-host
  bool fault_injection = false;
  double call_timeout_seconds = 300;   // a measurement not answered by then: a hung device
  double start_timeout_seconds = 300;  // process start, context creation and warm-up
  // The device's own host: built-ins only, it refuses submitted code (which runs in hosts
  // of its owner, server/device/tenant_backend.h).
  bool builtins_only = false;
};

class ProcessBackend final : public Backend {
 public:
  // Starts the host for `device` ("cpu", "cpu:N", "cuda:N") and reads what it serves; the
  // host warms up while the server starts (WarmUp() waits for it).
  static absl::StatusOr<std::unique_ptr<ProcessBackend>> Launch(const std::string& device,
                                                                const DeviceHostOptions& options);
  ~ProcessBackend() override;  // closes the channel; the host exits; killed if it does not

  const std::string& name() const override { return name_; }
  v1::Device Describe() const override;
  std::vector<v1::Implementation> Implementations() const override;
  absl::Status WarmUp() override;
  absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                      const HostOutputs& outputs, const std::string& impl,
                                      const MeasureOptions& options) override;
  // Kept here and sent with the first call of it to each host process (a replaced host
  // loads it again); listed as a test-only implementation, run only when named.
  absl::Status AddSubmission(const SubmittedKernel& kernel) override;
  double MeasuredCopyBandwidth() const override;
  v1::Clocks ReadClocks(bool* available) override;
  std::string DriverVersion() const override;
  std::string RuntimeVersion() const override;
  std::string TimerStatus() const override;
  bool Healthy() const override;
  // Kills the host if it still runs, starts a new one and waits for its warm-up.
  absl::Status Recover() override;

  pid_t host_pid() const;  // for logs and tests; 0 when no host runs

 private:
  ProcessBackend(std::string name, DeviceHostOptions options);
  absl::Status Spawn();  // a new host; reads its identity
  absl::Status AwaitReady();
  // Sends `call` and waits for the host's reply (a stop asked for is passed on through the
  // region's stop flag). An error only where the host was lost: it crashed, hung (no reply
  // within the call timeout) or the link broke; `answered` is when the reply came.
  absl::Status Exchange(const internal::MeasureCall& call, const std::string& during,
                        const MeasureOptions& options, internal::MeasureReply* reply,
                        std::chrono::steady_clock::time_point* answered);
  // The call's status from its reply; a faulted device is reported, its host killed, and the
  // caller told what was running.
  absl::Status ReplyStatus(const internal::MeasureReply& reply, const std::string& during);
  // Marks the device faulted, kills the host and says how it ended.
  absl::Status HostLost(const std::string& during, const absl::Status& cause, bool hung);
  // Closes the channel, waits up to `grace` for the host to exit, then kills it. Returns
  // how it ended: "exited with status N", "was killed by signal N (name)".
  std::string KillHost(std::chrono::milliseconds grace = std::chrono::seconds(2));

  const std::string name_;
  const DeviceHostOptions options_;
  HostChannel channel_;  // worker thread only
  SharedRegion region_;  // worker thread only
  int oversized_calls_ = 0;

  mutable std::mutex mu_;  // guards what other threads read
  pid_t pid_ = 0;
  bool healthy_ = false;
  internal::HostIdentity identity_;
  internal::HostReady ready_;
  std::map<std::string, SubmittedKernel> submissions_;  // by id
  std::set<std::string> host_loaded_;                   // ids the current host has loaded
};

}  // namespace kerneleval::server
