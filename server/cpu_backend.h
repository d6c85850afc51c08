// The CPU backend: the operation on host memory, timed with the steady host clock. It is the
// embedded default where no GPU is present and stands in for devices in tests.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "server/backend.h"

namespace kerneleval::server {

// One host implementation. `scratch` holds RowBytes() for implementations that need it.
struct CpuImplementation {
  std::string name;
  std::string description;
  std::function<void(const FusedAddRmsNormArgs&, void* scratch)> run;
  bool test_only = false;  // runs only when a request names it
};

// cpu_fused (the default) and cpu_unfused (two passes, the sum rounded in between).
std::vector<CpuImplementation> BuiltinCpuImplementations();

// Test only, for CPU devices in a device host process: fault_crash aborts the process and
// fault_hang never returns, so that the server's handling of a dead or hung device runs
// without a GPU.
std::vector<CpuImplementation> ProcessFaultImplementations();

class CpuBackend final : public Backend {
 public:
  // `name` is "cpu" or "cpu:N". `copy_buffer_bytes` sizes the copy-bandwidth measurement.
  explicit CpuBackend(std::string name,
                      std::vector<CpuImplementation> impls = BuiltinCpuImplementations(),
                      std::size_t copy_buffer_bytes = std::size_t{128} << 20);

  const std::string& name() const override { return name_; }
  v1::Device Describe() const override;
  std::vector<v1::Implementation> Implementations() const override;
  absl::Status WarmUp() override;
  absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                      const HostOutputs& outputs, const std::string& impl,
                                      const MeasureOptions& options) override;
  double MeasuredCopyBandwidth() const override { return copy_bandwidth_.load(); }
  v1::Clocks ReadClocks(bool* available) override;
  std::string TimerStatus() const override { return "host steady clock (CPU backend)"; }

 private:
  const CpuImplementation* Find(const std::string& impl) const;

  std::string name_;
  std::vector<CpuImplementation> impls_;
  std::size_t copy_buffer_bytes_;
  std::size_t last_level_cache_bytes_;
  std::string model_;  // read once: Describe() is on every Run's path
  std::atomic<double> copy_bandwidth_{0};
  std::vector<unsigned char> flush_buffer_;
};

}  // namespace kerneleval::server
