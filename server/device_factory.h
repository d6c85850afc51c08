// Backends from a device specification: "auto" (every GPU, else the CPU), "cpu", "cuda"
// (every GPU), or a list such as "cuda:0,cuda:2".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend.h"

namespace kerneleval::server {

// NOT_FOUND naming `--device` for a GPU that is not there; FAILED_PRECONDITION for "cuda"
// in a build without CUDA, and for fault injection in a build that does not allow it.
absl::StatusOr<std::vector<std::unique_ptr<Backend>>> CreateBackends(const std::string& spec,
                                                                     int cpu_devices,
                                                                     bool fault_injection = false);

// Number of CUDA devices visible (0 without CUDA, a driver or a GPU).
int CudaDeviceCount();

}  // namespace kerneleval::server
