// Loads a compiled submission into the current CUDA context and launches its plan: the
// device host's half of a submission. The result becomes a CudaImplementation
// (server/cuda/cuda_backend.h) whose launch function is Launcher::Launch.
//
// Runs only in a device host process: a submission that faults, hangs or leaves a sticky
// error ends that process, never the server.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/kernels/cuda_owners.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/submission_abi.h"
#include "kerneleval/v1/submissions.pb.h"
#include "server/submissions/param_binding.h"

namespace kerneleval::server {
struct CudaDriver;
}  // namespace kerneleval::server

namespace kerneleval::server::submissions {

// Owns a CUmodule (cuModuleUnload on destruction). Driver calls go through cuda_driver.h:
// nothing here links libcuda, so that CUDA builds start where no driver is installed.
class CudaModule {
 public:
  CudaModule() = default;
  explicit CudaModule(CUmodule m) : m_(m) {}
  CudaModule(CudaModule&& o) noexcept : m_(o.m_) { o.m_ = nullptr; }
  CudaModule& operator=(CudaModule&& o) noexcept;
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  ~CudaModule();
  CUmodule get() const { return m_; }

 private:
  CUmodule m_ = nullptr;
};

class SubmissionLauncher {
 public:
  // Loads `cubin` into the current context (the device host's, cudaSetDevice first),
  // resolves every entry by the lowered names in `submission.diagnostics`, checks each
  // takes what its binding supplies (cuFuncGetParamInfo against param_binding.h's rule: one
  // kerneleval_params unless the plan lists the kernel's parameters), allocates the binding's
  // scratch parameters, opts in to the plan's dynamic shared
  // memory and checks the plan against this device. INVALID_ARGUMENT for a plan the device
  // cannot run; INTERNAL for a CUDA error.
  static absl::StatusOr<std::unique_ptr<SubmissionLauncher>> Load(const v1::Submission& submission,
                                                                  const std::string& cubin);

  // Launches the plan on `stream`. `scratch` is [batch, hidden] of the dtype when the plan
  // asks for one. cudaErrorInvalidValue when args' dtype or mode is not the submission's;
  // a launch error as CUDA reports it. Thread-compatible (one stream at a time).
  cudaError_t Launch(const FusedAddRmsNormArgs& args, void* scratch, cudaStream_t stream) const;

  // Unloads the module and loads the kept cubin again (entries re-resolved, attributes set
  // again, scratch parameters zeroed): every `__device__` variable starts from its initial
  // value, so that a kernel
  // cannot carry what it counted or saw from one measurement phase into the next. The
  // caller makes sure no launch of the old module is still queued or captured in a graph.
  absl::Status Reload();

  // A CudaImplementation's launch function that keeps this launcher alive.
  static std::function<cudaError_t(const FusedAddRmsNormArgs&, void*, cudaStream_t)> AsLaunchFn(
      std::shared_ptr<const SubmissionLauncher> launcher);
  // Its `reset` (fresh module state): Reload.
  static std::function<absl::Status()> AsResetFn(std::shared_ptr<SubmissionLauncher> launcher);

  const v1::Submission& submission() const { return submission_; }
  // The module image loaded: its line table maps a profile's sampled PCs to source lines.
  const std::string& cubin() const { return cubin_; }
  bool needs_scratch() const { return submission_.spec().launch_plan().needs_scratch(); }

 private:
  SubmissionLauncher() = default;
  // Loads cubin_ into module_ and resolves functions_ (Load and Reload).
  absl::Status LoadModule();
  // Allocates the binding's scratch parameters at the first load and zeroes them at each.
  absl::Status ZeroScratchParams();

  v1::Submission submission_;  // spec without source
  std::string cubin_;          // kept for Reload
  const CudaDriver* driver_ = nullptr;
  CudaModule module_;
  std::vector<CUfunction> functions_;                  // plan order
  std::vector<std::vector<std::size_t>> param_bytes_;  // per kernel, from the module
  std::vector<CudaDeviceMemory> scratch_memory_;       // every scratch parameter's buffer
  std::vector<std::uint64_t> scratch_sizes_;           // their sizes, same order
  std::vector<std::vector<void*>> scratch_pointers_;   // per kernel, in parameter order
  int sm_count_ = 0;
};

}  // namespace kerneleval::server::submissions
