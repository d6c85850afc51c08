#include "kerneleval/kernels/stream_gate_cuda.h"

namespace kerneleval {
namespace {

__device__ unsigned long long NowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void StreamGate(const volatile int* flag, int opened, unsigned long long timeout_ns) {
  const unsigned long long start = NowNs();
  while (*flag != opened && NowNs() - start < timeout_ns) {
  }
}

}  // namespace

cudaError_t LaunchStreamGate(const volatile int* flag, int opened, unsigned long long timeout_ns,
                             cudaStream_t stream) {
  StreamGate<<<1, 1, 0, stream>>>(flag, opened, timeout_ns);
  return cudaGetLastError();
}

}  // namespace kerneleval
