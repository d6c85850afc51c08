// DRAM bytes per call of a CUDA measurement, counted by the CUPTI profiler in windows of
// their own after the timed samples (server/cuda/dram_counters.h).
#pragma once

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_measurement.h"
#include "server/cuda/cupti_timer.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// Releases `lease` (the profiler needs CUPTI to itself), replays `protocol`'s calls in
// three windows and reports the median read and written bytes per call (DRAM, and L2
// where the chip counts both in one pass). A counter that
// cannot be read is reported as unavailable with its reason, never as an error. Drops the
// protocol's graph before CUPTI is detached.
v1::DramTraffic CountDramBytes(const MeasureOptions& options, CudaDevice& device,
                               CudaMeasurement* protocol, CuptiLease* lease, CudaWorkspace* w);

}  // namespace kerneleval::server
