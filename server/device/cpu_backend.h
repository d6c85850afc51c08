// The CPU backend: the operation on host memory, timed with the steady host clock. It is the
// embedded default where no GPU is present and stands in for devices in tests.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kerneleval/kernels/cpu_thread_pool.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// One host implementation. `scratch` holds TensorBytes() for implementations that need it.
struct CpuImplementation {
  std::string name;
  std::string description;
  std::function<void(const FusedAddRmsNormArgs&, void* scratch)> run;
  bool test_only = false;  // runs only when a request names it
  // Set for implementations that spread rows over the device's threads; called instead of
  // `run`.
  std::function<void(const FusedAddRmsNormArgs&, void* scratch, CpuThreadPool& threads)>
      run_on_threads;
};

// cpu_fused (the default) and cpu_unfused (two passes, the sum rounded in between), both
// Highway SIMD with their rows spread over the device's threads.
std::vector<CpuImplementation> BuiltinCpuImplementations();

// Test only, for CPU devices in a device host process: fault_crash aborts the process and
// fault_hang never returns, so that the server's handling of a dead or hung device runs
// without a GPU.
std::vector<CpuImplementation> ProcessFaultImplementations();

// Owns a pool of one thread per CPU this process may run on (the caller counts as one); its
// threads sleep between calls. Memory beyond the code is allocated when a request needs it:
// the cache-flush buffer at the first cold measurement, tensors per call.
class CpuBackend final : public Backend {
 public:
  // `name` is "cpu" or "cpu:N". `copy_buffer_bytes` sizes the copy-bandwidth measurement;
  // `threads` 0 means one per available CPU.
  explicit CpuBackend(std::string name,
                      std::vector<CpuImplementation> impls = BuiltinCpuImplementations(),
                      std::size_t copy_buffer_bytes = std::size_t{128} << 20, int threads = 0);

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
  void Call(const CpuImplementation& impl, const FusedAddRmsNormArgs& args, void* scratch);
  // Evicts every core's caches: each thread reads the flush buffer (allocated here once).
  void FlushCaches();
  // The timed samples of Measure after its result call (cpu_backend.cc).
  absl::StatusOr<Measurement> TimeCalls(const Problem& problem, const HostInputs& inputs,
                                        const CpuImplementation& fn, const MeasureOptions& options,
                                        unsigned char* scratch);

  std::string name_;
  std::vector<CpuImplementation> impls_;
  std::size_t copy_buffer_bytes_;
  std::size_t last_level_cache_bytes_;
  std::string model_;           // read once: Describe() is on every Run's path
  std::uint64_t memory_bytes_;  // likewise (a sysinfo call each time it is read)
  std::atomic<double> copy_bandwidth_{0};
  CpuThreadPool threads_;
  // Reads `words` on every thread of the device, one slice each: what evicts every core's
  // caches.
  void ReadOnEveryThread(const std::uint64_t* words, std::size_t count);
  std::unique_ptr<std::uint64_t[]> flush_buffer_;  // 2x the last-level cache; null until used
  std::atomic<double> flush_seconds_{0};           // one flush, measured at warm-up
  std::size_t flush_words_ = 0;
  std::atomic<std::uint64_t> flush_sink_{0};
};

}  // namespace kerneleval::server
