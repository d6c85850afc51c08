// DRAM bytes read and written by the work of a window, from CUPTI's range profiler
// (dram__bytes_read.sum, dram__bytes_write.sum; CUDA 13 profiler host and target APIs), and
// in the same pass where the chip allows it the L2 sectors read and written
// (lts__t_sectors_op_read.sum, lts__t_sectors_op_write.sum).
//
// The counters are device-wide: everything the device does between the range's push and
// pop counts, so a window runs alone on its device (an attached CUPTI lease) after the
// caller's preparation (an L2 flush) has finished. Writes still dirty in L2 when the range
// closes are written back later and are not counted (on an H200, 20 MB of a 66 MB output;
// PERFORMANCE.md): compare writes with the declared bytes minus the L2 size.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cuda/cupti_timer.h"

namespace kerneleval::server {

struct DramBytes {
  double read = 0;
  double write = 0;
  bool l2 = false;  // the L2 figures were counted
  double l2_read = 0;
  double l2_write = 0;
};

// Runs `windows` windows on `device` (the current device): `prepare` (untimed, uncounted),
// then `window` (enqueues the work and synchronizes) inside one profiled range each, all
// ranges in one start and stop of the profiler.
// The lease must be an attached kProfiler lease. UNAVAILABLE with "counters unavailable on
// this machine: ..." where the profiler cannot read counters (gVisor, no permission).
absl::StatusOr<std::vector<DramBytes>> MeasureDramBytes(
    const CuptiLease& lease, int device, int windows, const std::function<absl::Status()>& prepare,
    const std::function<absl::Status()>& window);

}  // namespace kerneleval::server
