#include "kerneleval/kernels/l2_flush_cuda.h"

#include <cstdint>

namespace kerneleval {
namespace {

__global__ void ReadFlush(const uint4* data, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const uint4 v = data[i];
    acc |= v.x | v.y | v.z | v.w;
  }
  // The buffer is zero-filled once, so this store never happens; the compiler cannot know.
  if (acc == 0xffffffffu) *sink = acc;
}

}  // namespace

cudaError_t LaunchL2Flush(const void* buffer, std::size_t bytes, unsigned* sink, int sm_count,
                          cudaStream_t stream, int extra_ctas) {
  if (sm_count < 1 || extra_ctas < 0) return cudaErrorInvalidValue;
  ReadFlush<<<sm_count * 4 + extra_ctas, 512, 0, stream>>>(static_cast<const uint4*>(buffer),
                                                           bytes / 16, sink);
  return cudaGetLastError();
}

}  // namespace kerneleval
