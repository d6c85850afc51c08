#include "server/app/device_factory.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "server/device/cpu_backend.h"
#include "server/device/process_backend.h"
#ifdef KERNELEVAL_HAVE_CUDA
#include "server/cuda/cuda_backend.h"
#endif

namespace kerneleval::server {
namespace {

void AddCpuNames(int cpu_devices, std::vector<std::string>* out) {
  if (cpu_devices <= 1) {
    out->push_back("cpu");
    return;
  }
  for (int i = 0; i < cpu_devices; ++i) out->push_back(absl::StrCat("cpu:", i));
}

absl::Status AddCudaName(int ordinal, std::vector<std::string>* out) {
#ifdef KERNELEVAL_HAVE_CUDA
  const int count = CudaDeviceCount();
  if (ordinal < 0 || ordinal >= count) {
    return absl::NotFoundError(absl::StrCat("--device: cuda:", ordinal, " not found (", count,
                                            " CUDA device(s) visible)"));
  }
  out->push_back(absl::StrCat("cuda:", ordinal));
  return absl::OkStatus();
#else
  (void)ordinal;
  (void)out;
  return absl::FailedPreconditionError("--device: this build has no CUDA support");
#endif
}

absl::Status AddAllCudaNames(std::vector<std::string>* out) {
  const int gpus = CudaDeviceCount();
  if (gpus == 0) return absl::NotFoundError("--device: cuda requested but no GPU is visible");
  for (int i = 0; i < gpus; ++i) RETURN_IF_ERROR(AddCudaName(i, out));
  return absl::OkStatus();
}

bool IsCpuName(absl::string_view device) {
  return device == "cpu" || absl::StartsWith(device, "cpu:");
}

}  // namespace

int CudaDeviceCount() {
#ifdef KERNELEVAL_HAVE_CUDA
  return CudaBackend::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::vector<std::string>> ResolveDevices(const std::string& spec, int cpu_devices) {
  std::vector<std::string> out;
  if (spec == "auto" || spec.empty()) {
    if (CudaDeviceCount() == 0) {
      AddCpuNames(cpu_devices, &out);
    } else {
      RETURN_IF_ERROR(AddAllCudaNames(&out));
    }
    return out;
  }
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    int ordinal = -1;
    if (part == "cpu") {
      AddCpuNames(cpu_devices, &out);
    } else if (part == "cuda") {
      RETURN_IF_ERROR(AddAllCudaNames(&out));
    } else if (absl::StartsWith(part, "cuda:") && absl::SimpleAtoi(part.substr(5), &ordinal)) {
      RETURN_IF_ERROR(AddCudaName(ordinal, &out));
    } else if (absl::StartsWith(part, "cuda:")) {
      return absl::InvalidArgumentError(absl::StrCat("--device: bad device '", part, "'"));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--device: unknown device '", part, "' (auto, cpu, cuda, cuda:N)"));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device,
                                                       bool fault_injection, bool in_device_host,
                                                       bool allow_submissions) {
#ifndef KERNELEVAL_FAULT_INJECTION
  if (fault_injection) {
    return absl::FailedPreconditionError(
        "--enable-fault-injection: this build does not allow fault injection");
  }
#endif
  if (IsCpuName(device)) {
    std::vector<CpuImplementation> impls = BuiltinCpuImplementations();
    if (fault_injection && in_device_host) {
      for (CpuImplementation& fault : ProcessFaultImplementations()) impls.push_back(fault);
    }
    return std::make_unique<CpuBackend>(device, std::move(impls));
  }
  int ordinal = -1;
  if (!absl::StartsWith(device, "cuda:") || !absl::SimpleAtoi(device.substr(5), &ordinal)) {
    return absl::InvalidArgumentError(absl::StrCat("--device: bad device '", device, "'"));
  }
#ifdef KERNELEVAL_HAVE_CUDA
  std::vector<CudaImplementation> impls = BuiltinCudaImplementations();
  if (fault_injection) {
    impls.push_back(FaultInjectionImplementation());
  }
  auto backend = std::make_unique<CudaBackend>(ordinal, std::move(impls));
  if (in_device_host && allow_submissions) backend->AllowSubmissions();
  return backend;
#else
  (void)allow_submissions;
  return absl::FailedPreconditionError("--device: this build has no CUDA support");
#endif
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> CreateBackends(
    const std::string& spec, int cpu_devices, const BackendOptions& options) {
  ASSIGN_OR_RETURN(const std::vector<std::string> devices, ResolveDevices(spec, cpu_devices));
  std::vector<std::unique_ptr<Backend>> out;
  for (const std::string& device : devices) {
    const bool isolate = options.isolation == DeviceIsolation::kProcess ||
                         (options.isolation == DeviceIsolation::kAuto && !IsCpuName(device));
    if (isolate) {
      DeviceHostOptions host;
      host.executable = options.device_host_path;
      host.fault_injection = options.fault_injection;
      host.call_timeout_seconds = options.device_call_timeout_seconds;
      if (IsCpuName(device)) {
        ASSIGN_OR_RETURN(std::unique_ptr<ProcessBackend> backend,
                         ProcessBackend::Launch(device, host));
        out.push_back(std::move(backend));
        continue;
      }
      // A GPU: built-ins (and the OIP front) in the device's host, each owner's submissions
      // in a host of its own, started on the owner's first submitted job.
      DeviceHostOptions tenant_host = host;
      host.builtins_only = true;
      ASSIGN_OR_RETURN(std::unique_ptr<ProcessBackend> device_host,
                       ProcessBackend::Launch(device, host));
      auto make_host =
          [device, tenant_host](const std::string&) -> absl::StatusOr<std::unique_ptr<Backend>> {
        ASSIGN_OR_RETURN(std::unique_ptr<ProcessBackend> b,
                         ProcessBackend::Launch(device, tenant_host));
        return std::unique_ptr<Backend>(std::move(b));
      };
      out.push_back(std::make_unique<TenantBackend>(std::move(device_host), std::move(make_host),
                                                    options.tenant_hosts));
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                       CreateBackend(device, options.fault_injection));
      out.push_back(std::move(backend));
    }
  }
  return out;
}

}  // namespace kerneleval::server
