// Move-only owners of CUDA resources (streams, events, graphs, device and pinned memory), so
// that no error path leaks them in a long-running server, a benchmark or a test. CUDA runtime
// only: each user reports a failed creation its own way (absl::Status in the server, exit in
// the benchmark, a failed assertion in the tests).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace kerneleval {

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
    // A destructor has no one to tell of an error: it is ignored, the handle dropped.
    if (h_ != Handle{}) static_cast<void>(Destroy(h_));
    h_ = Handle{};
  }

 private:
  Handle h_{};
};

using CudaStream = CudaHandle<cudaStream_t, cudaStreamDestroy>;
using CudaEvent = CudaHandle<cudaEvent_t, cudaEventDestroy>;
using CudaGraph = CudaHandle<cudaGraph_t, cudaGraphDestroy>;
using CudaGraphExec = CudaHandle<cudaGraphExec_t, cudaGraphExecDestroy>;

// A stream without implicit synchronization with the legacy default stream
// (cudaStreamNonBlocking): work queued on stream 0 neither waits for it nor makes it wait.
inline cudaError_t CreateCudaStream(CudaStream* out) {
  cudaStream_t s = nullptr;
  const cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err == cudaSuccess) *out = CudaStream(s);
  return err;
}

inline cudaError_t CreateCudaEvent(CudaEvent* out) {
  cudaEvent_t e = nullptr;
  const cudaError_t err = cudaEventCreate(&e);
  if (err == cudaSuccess) *out = CudaEvent(e);
  return err;
}

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
  // On success `*out` holds `bytes` new bytes (none for 0) and what it held before is freed;
  // on failure `*out` is left as it was.
  static cudaError_t Allocate(std::size_t bytes, CudaMemory* out) {
    CudaMemory fresh;
    if (bytes > 0) {
      const cudaError_t err = Alloc(&fresh.ptr_, bytes);
      if (err != cudaSuccess) return err;
      fresh.bytes_ = bytes;
    }
    *out = std::move(fresh);
    return cudaSuccess;
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
    // As in CudaHandle::Reset: an error here has no one to tell.
    if (ptr_ != nullptr) static_cast<void>(Release(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Device memory of the current device.
using CudaDeviceMemory = CudaMemory<cuda_memory::AllocateDevice, cudaFree>;
// Page-locked host memory: copies from and to it are asynchronous DMA, without the driver's
// staging through its own pinned buffer.
using CudaPinnedMemory = CudaMemory<cuda_memory::AllocatePinned, cudaFreeHost>;

}  // namespace kerneleval
