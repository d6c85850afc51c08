// The CUDA backend: one GPU, one stream, owned by the device's worker thread. Times kernels
// with CUPTI activity records where available (CUPTI attached for that measurement only),
// CUDA events otherwise; flushes L2 by reading twice its size outside the timed window;
// replays CUDA graphs on request; waits for a settled SM clock before timing, samples the
// clocks while timing, and counts DRAM bytes on request.
//
// Its parts, one idea a file: the device's lifecycle and shared resources (cuda_device.h),
// the buffers kept between measurements (cuda_input_buffers.h), one measurement's state
// (cuda_workspace.h), the protocols cold / hot / graph replay (cuda_measurement.h), the
// result call (cuda_result_call.h), the checks of submitted code's calls
// (cuda_call_checks_runner.h) and the DRAM windows (cuda_dram_count.h).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_implementation.h"
#include "server/cuda/cuda_input_buffers.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// cuda_fused (the default) and cuda_unfused (the two-kernel baseline).
std::vector<CudaImplementation> BuiltinCudaImplementations();

// fault_illegal_address: test-only, writes through an invalid pointer (a sticky fault).
CudaImplementation FaultInjectionImplementation();

class CudaBackend final : public Backend {
 public:
  static int DeviceCount();  // 0 when the runtime finds no device or no driver

  explicit CudaBackend(int ordinal,
                       std::vector<CudaImplementation> impls = BuiltinCudaImplementations());

  const std::string& name() const override { return name_; }
  v1::Device Describe() const override;
  std::vector<v1::Implementation> Implementations() const override;
  absl::Status WarmUp() override;
  absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                      const HostOutputs& outputs, const std::string& impl,
                                      const MeasureOptions& options) override;
  double MeasuredCopyBandwidth() const override { return copy_bandwidth_.load(); }
  v1::Clocks ReadClocks(bool* available) override;
  void PinHostMemory(void* data, std::size_t bytes) override;
  void UnpinHostMemory(void* data) override;
  std::string DriverVersion() const override;
  std::string RuntimeVersion() const override;
  std::string TimerStatus() const override;
  bool Healthy() const override { return healthy_.load(); }
  // Lets AddSubmission load submitted code: set in a device host process only, where a
  // submission's fault ends that process and not the server.
  void AllowSubmissions() { submissions_allowed_ = true; }
  // Loads the cubin and registers it as a test-only implementation named by its id
  // (server/cuda/cuda_backend_submissions.cc).
  absl::Status AddSubmission(const SubmittedKernel& kernel) override;
  absl::Status Recover() override;

 private:
  // One measurement, step by step (server/cuda/cuda_backend_measure.cc): inputs, the result
  // call, the checks, the protocol's timed samples, the DRAM windows.
  absl::StatusOr<Measurement> MeasureOnDevice(const Problem& problem, const HostInputs& inputs,
                                              const HostOutputs& outputs,
                                              const CudaImplementation& impl,
                                              const MeasureOptions& options);
  absl::StatusOr<v1::Timer> ResolveTimer(const MeasureOptions& options) const;

  const int ordinal_;
  const std::string name_;
  std::vector<CudaImplementation> impls_;  // grows only by AddSubmission, in a device host
  bool submissions_allowed_ = false;
  CudaDevice device_;  // context, stream, L2 flush, stream gate (server/cuda/cuda_device.h)
  std::atomic<double> copy_bandwidth_{0};
  std::atomic<bool> healthy_{true};
  CudaInputBuffers buffers_;  // kept between measurements (server/cuda/cuda_input_buffers.h)
};

}  // namespace kerneleval::server
