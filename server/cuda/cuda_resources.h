// The server's view of the CUDA owners of kerneleval/kernels/cuda_owners.h: creation and
// allocation that report failure as absl::Status, and the one CUDA-check macro of the server
// layer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kerneleval/kernels/cuda_owners.h"

namespace kerneleval::server {

// cudaError_t -> absl::Status naming the call and where it was made. Allocation failures
// are RESOURCE_EXHAUSTED (the caller asked for too much), everything else INTERNAL.
inline absl::Status CudaStatus(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(call, " failed at ", file, ":", line, ": ",
                                       cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  return err == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError(msg)
                                          : absl::InternalError(msg);
}

#define KE_CUDA_RETURN_IF_ERROR(call)                                        \
  do {                                                                       \
    ::absl::Status ke_cuda_status_ =                                         \
        ::kerneleval::server::CudaStatus((call), #call, __FILE__, __LINE__); \
    if (!ke_cuda_status_.ok()) return ke_cuda_status_;                       \
  } while (false)

// For teardown: errors are ignored (there is no one to tell).
#define KE_CUDA_NO_THROW(call) static_cast<void>(call)

using ::kerneleval::CudaEvent;
using ::kerneleval::CudaGraph;
using ::kerneleval::CudaGraphExec;
using ::kerneleval::CudaStream;

// A CUDA memory owner whose Allocate returns absl::StatusOr, the server's way to report a
// failure; everything else is the owner's.
template <typename Memory>
class StatusOrMemory : public Memory {
 public:
  StatusOrMemory() = default;
  static absl::StatusOr<StatusOrMemory> Allocate(std::size_t bytes) {
    StatusOrMemory memory;
    KE_CUDA_RETURN_IF_ERROR(Memory::Allocate(bytes, &memory));
    return memory;
  }
};

// Device memory of the current device.
using DeviceBuffer = StatusOrMemory<CudaDeviceMemory>;
// Page-locked host memory, for asynchronous copies.
using PinnedBuffer = StatusOrMemory<CudaPinnedMemory>;

inline absl::StatusOr<CudaStream> CreateStream() {
  CudaStream stream;
  KE_CUDA_RETURN_IF_ERROR(CreateCudaStream(&stream));
  return stream;
}

inline absl::StatusOr<CudaEvent> CreateEvent() {
  CudaEvent event;
  KE_CUDA_RETURN_IF_ERROR(CreateCudaEvent(&event));
  return event;
}

}  // namespace kerneleval::server
