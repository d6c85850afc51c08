#include "server/device_factory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/cpu_backend.h"
#ifdef KERNELEVAL_HAVE_CUDA
#include "server/cuda_backend.h"
#endif

namespace kerneleval::server {
namespace {

void AddCpu(int cpu_devices, std::vector<std::unique_ptr<Backend>>* out) {
  if (cpu_devices <= 1) {
    out->push_back(std::make_unique<CpuBackend>("cpu"));
    return;
  }
  for (int i = 0; i < cpu_devices; ++i) {
    out->push_back(std::make_unique<CpuBackend>(absl::StrCat("cpu:", i)));
  }
}

absl::Status AddCuda(int ordinal, bool fault_injection,
                     std::vector<std::unique_ptr<Backend>>* out) {
#ifdef KERNELEVAL_HAVE_CUDA
  const int count = CudaDeviceCount();
  if (ordinal < 0 || ordinal >= count) {
    return absl::NotFoundError(absl::StrCat("--device: cuda:", ordinal, " not found (", count,
                                            " CUDA device(s) visible)"));
  }
  std::vector<CudaImplementation> impls = BuiltinCudaImplementations();
  if (fault_injection) impls.push_back(FaultInjectionImplementation());
  out->push_back(std::make_unique<CudaBackend>(ordinal, std::move(impls)));
  return absl::OkStatus();
#else
  (void)ordinal;
  (void)fault_injection;
  (void)out;
  return absl::FailedPreconditionError("--device: this build has no CUDA support");
#endif
}

}  // namespace

int CudaDeviceCount() {
#ifdef KERNELEVAL_HAVE_CUDA
  return CudaBackend::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> CreateBackends(const std::string& spec,
                                                                     int cpu_devices,
                                                                     bool fault_injection) {
#ifndef KERNELEVAL_FAULT_INJECTION
  if (fault_injection) {
    return absl::FailedPreconditionError(
        "--enable-fault-injection: this build does not allow fault injection");
  }
#endif
  std::vector<std::unique_ptr<Backend>> out;
  if (spec == "auto" || spec.empty()) {
    const int gpus = CudaDeviceCount();
    if (gpus == 0) {
      AddCpu(cpu_devices, &out);
    } else {
      for (int i = 0; i < gpus; ++i) {
        if (absl::Status s = AddCuda(i, fault_injection, &out); !s.ok()) return s;
      }
    }
    return out;
  }
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    if (part == "cpu") {
      AddCpu(cpu_devices, &out);
    } else if (part == "cuda") {
      const int gpus = CudaDeviceCount();
      if (gpus == 0) return absl::NotFoundError("--device: cuda requested but no GPU is visible");
      for (int i = 0; i < gpus; ++i) {
        if (absl::Status s = AddCuda(i, fault_injection, &out); !s.ok()) return s;
      }
    } else if (absl::StartsWith(part, "cuda:")) {
      int ordinal = -1;
      if (!absl::SimpleAtoi(part.substr(5), &ordinal)) {
        return absl::InvalidArgumentError(absl::StrCat("--device: bad device '", part, "'"));
      }
      if (absl::Status s = AddCuda(ordinal, fault_injection, &out); !s.ok()) return s;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--device: unknown device '", part, "' (auto, cpu, cuda, cuda:N)"));
    }
  }
  return out;
}

}  // namespace kerneleval::server
