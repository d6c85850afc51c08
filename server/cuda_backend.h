// The CUDA backend: one GPU, one stream, owned by the device's worker thread. Times kernels
// with CUPTI activity records where available, CUDA events otherwise; flushes L2 by reading
// twice its size outside the timed window; replays CUDA graphs on request.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/cuda_resources.h"

namespace kerneleval::server {

struct CudaImplementation {
  std::string name;
  std::string description;
  bool needs_scratch = false;
  std::function<cudaError_t(const FusedAddRmsNormArgs&, void* scratch, cudaStream_t)> launch;
  bool test_only = false;  // runs only when a request names it; never launched by WarmUp
};

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
  absl::Status Recover() override;

 private:
  struct BufferSet {
    DeviceBuffer x, r, out, res, scratch;
  };
  absl::StatusOr<Measurement> MeasureOnDevice(const Problem& problem, const HostInputs& inputs,
                                              const HostOutputs& outputs,
                                              const CudaImplementation& impl,
                                              const MeasureOptions& options);
  absl::Status MeasureCopyBandwidth();

  const int ordinal_;
  const std::string name_;
  std::vector<CudaImplementation> impls_;
  v1::Device static_info_;
  std::atomic<double> copy_bandwidth_{0};
  std::atomic<bool> healthy_{true};
  CudaStream stream_;
  DeviceBuffer flush_;       // 2 x L2, read before cold calls
  DeviceBuffer flush_sink_;  // the flush kernel's never-taken store
  DeviceBuffer gate_flag_;   // the stream gate of hot event-timed calls ...
  CudaStream gate_stream_;   // ... and the stream that opens it
  // The weight and first input set of the last call, kept for the next one where they are
  // large enough: cudaMalloc and cudaFree (which waits for the device) cost several times a
  // small kernel, on the path of every Run.
  DeviceBuffer kept_weight_;
  BufferSet kept_set_;
};

}  // namespace kerneleval::server
