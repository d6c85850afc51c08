// The service's side of launch_path_bench, kept out of its CUDA file so that nvcc never
// parses Abseil or protobuf headers: a source compiled with the options a submission gets,
// and the parameter block a submission's launch gets.
#pragma once

#include <string>
#include <vector>

#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/submission_abi.h"

namespace kerneleval::launch_path {

struct NvrtcBuild {
  std::string cubin;
  std::vector<std::string> lowered;  // one per name expression, in order
  std::string resources;             // ptxas' register and spill lines
};

// NVRTC with the service's options (NvrtcOptions) for the arch of compute capability
// major.minor, the ABI header from `abi_include` instead of memory. Exits on failure.
NvrtcBuild CompileLikeTheService(const std::string& source, const std::vector<std::string>& names,
                                 int major, int minor, const std::string& cuda_include,
                                 const std::string& abi_include);

// MakeParams of the service's launcher: one-kernel plan, no scratch.
kerneleval_params ServiceParams(const FusedAddRmsNormArgs& args, int sm_count);

}  // namespace kerneleval::launch_path
