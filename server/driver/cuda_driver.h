// The few CUDA driver API functions the server's CUDA parts call (submitted kernels' modules
// and launches, the range profiler's context), resolved at run time through the runtime's
// cudaGetDriverEntryPointByVersion instead of linking libcuda: the same binaries then start
// on machines without a GPU driver (CI, CPU-only nodes), where only the CPU backend runs.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "absl/status/statusor.h"

namespace kerneleval::server {

struct CudaDriver {
  PFN_cuGetErrorName_v6000 GetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 GetErrorString = nullptr;
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute = nullptr;
  PFN_cuCtxGetCurrent_v4000 CtxGetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 CtxGetDevice = nullptr;
  PFN_cuModuleLoadData_v2000 ModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 ModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 ModuleGetFunction = nullptr;
  PFN_cuFuncSetAttribute_v9000 FuncSetAttribute = nullptr;
  PFN_cuFuncGetParamInfo_v12040 FuncGetParamInfo = nullptr;
  PFN_cuLaunchKernelEx_v11060 LaunchKernelEx = nullptr;
};

// Resolved once, on first use; FAILED_PRECONDITION naming the symbol where the driver lacks
// one (or there is no driver). Thread-safe.
absl::StatusOr<const CudaDriver*> Driver();

}  // namespace kerneleval::server
