// Move-only owners of CUDA resources, so that no error path leaks memory, streams, events
// or graphs in a long-running server, and the one CUDA-check macro of the server layer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

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

// For destructors: errors are ignored (there is no one to tell), the handle is dropped.
#define KE_CUDA_NO_THROW(call) static_cast<void>(call)

template <typename Handle, cudaError_t (*Destroy)(Handle)>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(Handle h) : h_(h) {}
  CudaHandle(CudaHandle&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  CudaHandle& operator=(CudaHandle&& o) noexcept {
    if (this != &o) {
      Reset();
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  ~CudaHandle() { Reset(); }

  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  void Reset() {
    if (h_ != Handle{}) KE_CUDA_NO_THROW(Destroy(h_));
    h_ = Handle{};
  }

 private:
  Handle h_{};
};

using CudaStream = CudaHandle<cudaStream_t, cudaStreamDestroy>;
using CudaEvent = CudaHandle<cudaEvent_t, cudaEventDestroy>;
using CudaGraph = CudaHandle<cudaGraph_t, cudaGraphDestroy>;
using CudaGraphExec = CudaHandle<cudaGraphExec_t, cudaGraphExecDestroy>;

namespace cuda_memory {
// Out of memory is not sticky: cleared, so that the next launch's error check does not see it.
inline cudaError_t AllocateDevice(void** p, std::size_t bytes) {
  const cudaError_t e = cudaMalloc(p, bytes);
  if (e == cudaErrorMemoryAllocation) cudaGetLastError();
  return e;
}
inline cudaError_t AllocatePinned(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
}  // namespace cuda_memory

// Memory from a CUDA allocator, freed by its matching call.
template <cudaError_t (*Alloc)(void**, std::size_t), cudaError_t (*Release)(void*)>
class CudaMemory {
 public:
  CudaMemory() = default;
  static absl::StatusOr<CudaMemory> Allocate(std::size_t bytes) {
    CudaMemory b;
    if (bytes == 0) return b;
    KE_CUDA_RETURN_IF_ERROR(Alloc(&b.ptr_, bytes));
    b.bytes_ = bytes;
    return b;
  }
  CudaMemory(CudaMemory&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      Free();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  ~CudaMemory() { Free(); }

  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void Free() {
    if (ptr_ != nullptr) KE_CUDA_NO_THROW(Release(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Device memory of the current device.
using DeviceBuffer = CudaMemory<cuda_memory::AllocateDevice, cudaFree>;
// Page-locked host memory: copies from and to it are asynchronous DMA, without the driver's
// staging through its own pinned buffer.
using PinnedBuffer = CudaMemory<cuda_memory::AllocatePinned, cudaFreeHost>;

inline absl::StatusOr<CudaStream> CreateStream() {
  cudaStream_t s = nullptr;
  KE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return CudaStream(s);
}

inline absl::StatusOr<CudaEvent> CreateEvent() {
  cudaEvent_t e = nullptr;
  KE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  return CudaEvent(e);
}

}  // namespace kerneleval::server
