// Holds a stream until the host has queued the work to be timed. CUDA events around a call
// on an idle stream also time the host's launch of that call: the start event is reached
// at once and the kernel arrives microseconds later (measured on an H200: 9-11 us for a
// 1.4 us kernel). A gate kernel spinning on a flag keeps the stream busy
// until the start event, the call and the stop event are all queued, so that they run back
// to back (the blocking-kernel technique of nvbench).
#pragma once

#include <cuda_runtime_api.h>

namespace kerneleval {

// Launches one thread that spins until `*flag` (device memory, set by a write from another
// stream) equals `opened` or `timeout_ns` has passed on the device clock, so that a gate
// nobody opens cannot hang the stream. Each gate waits for a value of its own (the caller
// counts generations), so the flag needs no closing write and a late opening write of an
// earlier gate cannot open a later one.
cudaError_t LaunchStreamGate(const volatile int* flag, int opened, unsigned long long timeout_ns,
                             cudaStream_t stream);

}  // namespace kerneleval
