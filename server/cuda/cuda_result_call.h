// The result call of a CUDA measurement: one call on pristine inputs (set 0) whose outputs
// are what the caller sees, copied back to the host.
#pragma once

#include "absl/status/statusor.h"
#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_workspace.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// Runs the result call and copies its outputs to `outputs` (where given). `timed`: the call
// is also a hot event-timed sample (behind the stream gate), and its seconds are returned;
// else 0. `copy_back_seconds`: the copies of the results to `outputs` (0 when there are none).
absl::StatusOr<double> RunResultCall(CudaDevice& device, const HostOutputs& outputs, bool timed,
                                     CudaWorkspace* w, double* copy_back_seconds);

}  // namespace kerneleval::server
