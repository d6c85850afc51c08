#include "server/driver/cuda_driver.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace kerneleval::server {
namespace {

// `version` is the CUDA version that introduced the signature of the typedef used: the
// driver returns that variant even where a newer one exists (cuCtxGetDevice changed in 13.0).
template <typename Fn>
absl::Status Resolve(const char* symbol, unsigned version, Fn* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA driver function ", symbol, " is unavailable (", cudaGetErrorName(e), ")"));
  }
  *out = reinterpret_cast<Fn>(fn);
  return absl::OkStatus();
}

absl::StatusOr<CudaDriver> Load() {
  CudaDriver d;
  for (absl::Status s : {
           Resolve("cuGetErrorName", 6000, &d.GetErrorName),
           Resolve("cuGetErrorString", 6000, &d.GetErrorString),
           Resolve("cuDeviceGetAttribute", 2000, &d.DeviceGetAttribute),
           Resolve("cuCtxGetCurrent", 4000, &d.CtxGetCurrent),
           Resolve("cuCtxGetDevice", 2000, &d.CtxGetDevice),
           Resolve("cuModuleLoadData", 2000, &d.ModuleLoadData),
           Resolve("cuModuleUnload", 2000, &d.ModuleUnload),
           Resolve("cuModuleGetFunction", 2000, &d.ModuleGetFunction),
           Resolve("cuFuncSetAttribute", 9000, &d.FuncSetAttribute),
           Resolve("cuFuncGetParamInfo", 12040, &d.FuncGetParamInfo),
           Resolve("cuLaunchKernelEx", 11060, &d.LaunchKernelEx),
       }) {
    if (!s.ok()) return s;
  }
  return d;
}

}  // namespace

absl::StatusOr<const CudaDriver*> Driver() {
  static const absl::StatusOr<CudaDriver>* const driver = new absl::StatusOr<CudaDriver>(Load());
  if (!driver->ok()) return driver->status();
  return &**driver;
}

}  // namespace kerneleval::server
