// A profile of one call's kernels (v1::Protocol.profile): each kernel's launch from one
// traced call, then its counters (server/figures/kernel_profile.h's metrics) from CUPTI's
// range profiler, a range per kernel, in as many replays of the call as the counters need.
// All after the timed samples and the DRAM windows, never inside them.
#pragma once

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_workspace.h"
#include "server/cuda/cupti_timer.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// Releases `lease` (tracing and the profiler each need CUPTI to themselves) and profiles
// input set 0's call, each replay after the protocol's preparation (an L2 flush when cold).
// The report carries what the device counted: its limits, each kernel's launch and
// counters; the engine derives the figures. A profile that cannot be taken is reported
// unavailable with its reason, never as an error. The caller has dropped any graph that
// was replayed under tracing.
v1::ProfileReport ProfileCall(const MeasureOptions& options, CudaDevice& device, CuptiLease* lease,
                              CudaWorkspace* w);

}  // namespace kerneleval::server
