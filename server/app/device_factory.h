// Backends from a device specification: "auto" (every GPU, else the CPU), "cpu", "cuda"
// (every GPU), or a list such as "cuda:0,cuda:2". Each device runs in this process on its
// worker thread, or in a device host process of its own (see process_backend.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/device/backend.h"
#include "server/device/tenant_backend.h"

namespace kerneleval::server {

enum class DeviceIsolation {
  kThread,   // the backend lives in the server process
  kProcess,  // the backend lives in a kerneleval-device-host child, replaced after a fault
  kAuto,     // kProcess for GPUs (a sticky CUDA fault needs a new process), kThread for CPUs
};

struct BackendOptions {
  // Registers test-only implementations that fault on purpose. Refused unless the build
  // allows it (KERNELEVAL_FAULT_INJECTION).
  bool fault_injection = false;
  DeviceIsolation isolation = DeviceIsolation::kThread;
  std::string device_host_path;  // the kerneleval-device-host executable (kProcess)
  // A call a device host has not answered after this long counts as a hung device.
  double device_call_timeout_seconds = 300;
  // kProcess GPUs: each owner's submissions run in a host of their own
  // (server/device/tenant_backend.h), the device's host runs built-ins only.
  TenantHostOptions tenant_hosts;
};

// The device names a specification stands for ("cpu", "cpu:N", "cuda:N"). NOT_FOUND
// naming `--device` for a GPU that is not there; FAILED_PRECONDITION for "cuda" in a build
// without CUDA.
absl::StatusOr<std::vector<std::string>> ResolveDevices(const std::string& spec, int cpu_devices);

// One backend for `device` in this process. `in_device_host` adds the fault implementations
// that end the process (fault_crash, fault_hang) to CPU devices: they only make sense where
// a crash takes down a device host rather than the server; and, with `allow_submissions`,
// lets a GPU load submitted kernels (a tenant's host; never the device's own).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device,
                                                       bool fault_injection,
                                                       bool in_device_host = false,
                                                       bool allow_submissions = true);

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> CreateBackends(
    const std::string& spec, int cpu_devices, const BackendOptions& options = {});

// Number of CUDA devices visible (0 without CUDA, a driver or a GPU).
int CudaDeviceCount();

}  // namespace kerneleval::server
