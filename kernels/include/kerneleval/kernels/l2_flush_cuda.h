// Evicts the L2 cache before a cold measurement by reading a buffer of at least twice its
// size. A read leaves only clean lines behind; a memset flush leaves the cache full of dirty
// lines whose write-back then lands inside the next timed kernel (measured on an H200:
// 5-6 us added to a 40 us kernel at B = 12383 x 2048 bf16), which is not the kernel's cost.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace kerneleval {

// `buffer` holds `bytes` (a multiple of 16) of device memory; `sink` is one device unsigned
// that is written only if the buffer's contents are all ones, so the reads cannot be elided.
// The grid is 4 CTAs per SM plus `extra_ctas` (>= 0): a caller that varies it from call to
// call starts the kernels after the flush from a different state of the CTA scheduler, so
// their CTAs land on different SMs (server/cuda/cuda_backend.cc, FlushL2, says why that matters).
cudaError_t LaunchL2Flush(const void* buffer, std::size_t bytes, unsigned* sink, int sm_count,
                          cudaStream_t stream, int extra_ctas = 0);

}  // namespace kerneleval
