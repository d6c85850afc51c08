// One input set of a measurement's calls. Apart from cuda_input_buffers.h, which fills the
// sets, so that the workspace that holds them (cuda_workspace.h) need not include it.
#pragma once

#include "server/cuda/cuda_resources.h"

namespace kerneleval::server {

// One input set: the tensors of one call (output and residual_out unused in IN_PLACE,
// scratch only for implementations that need it).
struct CudaBufferSet {
  DeviceBuffer x, r, out, res, scratch;
};

}  // namespace kerneleval::server
