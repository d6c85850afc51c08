#include "kerneleval/kernels/fault_injection_cuda.h"

namespace kerneleval {
namespace {

// An address no allocation can have: the top of the 49-bit GPU virtual address space.
__global__ void WriteIllegalAddress(int* sink) { *sink = 42; }

}  // namespace

cudaError_t LaunchIllegalAddressFault(cudaStream_t stream) {
  WriteIllegalAddress<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(0x1fffffffffff0ull));
  return cudaGetLastError();
}

}  // namespace kerneleval
