// A planted cheat for tests only, never compiled into the server: the reward hack DRAM
// counters exist to catch. Tests register it on a CudaBackend of their own, or run it in a
// device host through kerneleval-planted-device-host (planted_device_host_main.cc).
#pragma once

#include "server/cuda/cuda_implementation.h"

namespace kerneleval::testing {

// lazy_half_rows: computes every row the first time it sees an output buffer and shape, and
// only the first half of the rows on later calls into the same buffer (the rest still holds
// the earlier results), so its outputs pass the correctness check while its timed calls do
// half the work. Test-only (run only when a request names it).
server::CudaImplementation LazyHalfRowsImplementation();

}  // namespace kerneleval::testing
