#include "server/cuda/cuda_backend.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kerneleval/kernels/fault_injection_cuda.h"
#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"
#include "server/cuda/cupti_timer.h"
#include "server/device/nvml.h"

namespace kerneleval::server {

std::vector<CudaImplementation> BuiltinCudaImplementations() {
  return {
      {"cuda_fused",
       "kerneleval's fused kernel: latency path for small batches, 16-byte streaming path for "
       "large ones",
       false,
       [](const FusedAddRmsNormArgs& a, void*, cudaStream_t s) {
         return LaunchFusedAddRmsNorm(a, s);
       }},
      {"cuda_unfused", "Two kernels (add, then RMSNorm) as eager PyTorch runs them", true,
       [](const FusedAddRmsNormArgs& a, void* scratch, cudaStream_t s) {
         return LaunchUnfusedAddRmsNorm(a, scratch, s);
       }},
  };
}

CudaImplementation FaultInjectionImplementation() {
  return {"fault_illegal_address",
          "Test only: faults with cudaErrorIllegalAddress to exercise device recovery", false,
          [](const FusedAddRmsNormArgs&, void*, cudaStream_t s) {
            return LaunchIllegalAddressFault(s);
          },
          /*test_only=*/true};
}

int CudaBackend::DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear: no driver or no device is not an error here
    return 0;
  }
  return n;
}

CudaBackend::CudaBackend(int ordinal, std::vector<CudaImplementation> impls)
    : ordinal_(ordinal),
      name_(absl::StrCat("cuda:", ordinal)),
      impls_(std::move(impls)),
      device_(ordinal) {
  // Every workload of the shipped suites together needs under 3 GB.
  if (device_.info().memory_bytes() > 0) {
    buffers_.set_budget_bytes(device_.info().memory_bytes() / 8);
  }
}

v1::Device CudaBackend::Describe() const {
  v1::Device d = device_.info();
  d.set_measured_copy_bytes_per_second(copy_bandwidth_.load());
  d.set_cold_flush_bytes(2 * d.l2_cache_bytes());  // the flush buffer (cuda_device.h)
  d.set_healthy(healthy_.load());
  return d;
}

std::vector<v1::Implementation> CudaBackend::Implementations() const {
  std::vector<CudaImplementation> listed;
  for (const CudaImplementation& impl : impls_) {
    if (!impl.submitted) listed.push_back(impl);
  }
  return DescribeImplementations(listed, "cuda");
}

std::string CudaBackend::DriverVersion() const {
  std::string v = Nvml::Get().DriverVersion();
  if (!v.empty()) return v;
  int d = 0;
  cudaDriverGetVersion(&d);
  return absl::StrCat("CUDA driver API ", d / 1000, ".", (d % 1000) / 10);
}

std::string CudaBackend::RuntimeVersion() const {
  int r = 0;
  cudaRuntimeGetVersion(&r);
  return absl::StrCat(r / 1000, ".", (r % 1000) / 10);
}

std::string CudaBackend::TimerStatus() const { return CuptiKernelTimer::StatusText(); }

v1::Clocks CudaBackend::ReadClocks(bool* available) {
  v1::Clocks c;
  *available = Nvml::Get().ReadClocks(device_.info().uuid(), &c);
  return c;
}

void CudaBackend::PinHostMemory(void* data, std::size_t bytes) {
  cudaSetDevice(ordinal_);
  const cudaError_t e = cudaHostRegister(data, bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: copies from pageable memory still work, only slower
    LogWarning(absl::StrCat(name_, ": cannot page-lock ", bytes, " bytes of host memory (",
                            cudaGetErrorString(e), "); copies go through staging"));
  }
}

void CudaBackend::UnpinHostMemory(void* data) {
  cudaSetDevice(ordinal_);
  if (cudaHostUnregister(data) != cudaSuccess) cudaGetLastError();
}

absl::Status CudaBackend::WarmUp() {
  RETURN_IF_ERROR(device_.Open());
  ASSIGN_OR_RETURN(const double copy_bandwidth, device_.MeasureCopyBandwidth());
  copy_bandwidth_.store(copy_bandwidth);
  // Load every implementation's module once so the first request does not pay for it.
  const Problem p{DType::kBF16, Mode::kOutput, 1, 2048, 1e-6f};
  std::vector<unsigned char> host(p.TensorBytes(), 0), w(p.WeightBytes(), 0);
  for (const CudaImplementation& impl : impls_) {
    if (impl.test_only) continue;
    MeasureOptions o;
    o.warmup = 0;
    o.repetitions = 1;
    o.cold = false;
    o.timer = v1::TIMER_CUDA_EVENTS;
    RETURN_IF_ERROR(MeasureOnDevice(p, {host.data(), host.data(), w.data()}, {}, impl, o).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<Measurement> CudaBackend::Measure(const Problem& problem, const HostInputs& inputs,
                                                 const HostOutputs& outputs,
                                                 const std::string& impl,
                                                 const MeasureOptions& options) {
  const CudaImplementation* found = nullptr;
  for (const CudaImplementation& i : impls_) {
    if (i.name == impl) found = &i;
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("implementation '", impl, "' is not available on ", name_));
  }
  if (found->submitted && !options.check_calls) {
    // However a request reached it, submitted code runs only under the checks.
    return absl::FailedPreconditionError(
        absl::StrCat("submission ", impl, " runs only with every call checked"));
  }
  if (!healthy_.load()) {
    return absl::UnavailableError(absl::StrCat(name_, " is recovering from a CUDA fault"));
  }
  KE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  absl::StatusOr<Measurement> m = MeasureOnDevice(problem, inputs, outputs, *found, options);
  if (!m.ok()) {
    // A sticky error poisons the context: the caller gets the error, and the worker
    // resets and rebuilds the device (Recover) before the next job. Errors of the request
    // itself (out of memory, a bad timer) leave it healthy.
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (IsStickyError(sticky) || IsStickyError(cudaGetLastError())) {
      healthy_.store(false);
      ReportFault();
    }
  }
  return m;
}

absl::Status CudaBackend::Recover() {
  buffers_.Clear();
  device_.Reset();
  const absl::Status warm = WarmUp();
  healthy_.store(warm.ok());
  return warm;
}

}  // namespace kerneleval::server
