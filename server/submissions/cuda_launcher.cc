#include "server/submissions/cuda_launcher.h"

#include "absl/strings/str_cat.h"
#include "server/driver/cuda_driver.h"
#include "server/submissions/abi_flags.h"
#include "server/submissions/launch_plan.h"
#include "server/submissions/param_binding.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

absl::Status DriverStatus(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (absl::StatusOr<const CudaDriver*> d = Driver(); d.ok()) {
    (*d)->GetErrorName(r, &name);
    (*d)->GetErrorString(r, &text);
  }
  const std::string msg =
      absl::StrCat(call, " failed: ", name ? name : "?", " (", text ? text : "?", ")");
  return r == CUDA_ERROR_OUT_OF_MEMORY ? absl::ResourceExhaustedError(msg)
                                       : absl::InternalError(msg);
}

#define KE_CU_RETURN_IF_ERROR(call)                                                           \
  do {                                                                                        \
    if (absl::Status ke_cu_s_ = DriverStatus((call), #call); !ke_cu_s_.ok()) return ke_cu_s_; \
  } while (false)

int DTypeOf(v1::DType d) {
  return d == v1::DTYPE_BF16   ? KERNELEVAL_DTYPE_BF16
         : d == v1::DTYPE_FP16 ? KERNELEVAL_DTYPE_FP16
                               : KERNELEVAL_DTYPE_FP32;
}

int ModeOf(v1::Mode m) {
  return m == v1::MODE_OUTPUT_AND_RESIDUAL ? KERNELEVAL_MODE_OUTPUT_AND_RESIDUAL
         : m == v1::MODE_IN_PLACE          ? KERNELEVAL_MODE_IN_PLACE
                                           : KERNELEVAL_MODE_OUTPUT;
}

}  // namespace

namespace {

// A module exists only where the driver was resolved.
void Unload(CUmodule m) {
  if (m != nullptr) static_cast<void>((*Driver())->ModuleUnload(m));
}

}  // namespace

CudaModule& CudaModule::operator=(CudaModule&& o) noexcept {
  if (this != &o) {
    Unload(m_);
    m_ = o.m_;
    o.m_ = nullptr;
  }
  return *this;
}

CudaModule::~CudaModule() { Unload(m_); }

absl::StatusOr<std::unique_ptr<SubmissionLauncher>> SubmissionLauncher::Load(
    const v1::Submission& submission, const std::string& cubin) {
  std::unique_ptr<SubmissionLauncher> l(new SubmissionLauncher());
  l->submission_ = submission;
  l->submission_.mutable_spec()->clear_source();
  const v1::LaunchPlan& plan = submission.spec().launch_plan();
  if (submission.diagnostics().kernels_size() != plan.kernels_size()) {
    return absl::InternalError(
        absl::StrCat("submission ", submission.id(), ": diagnostics do not match its launch plan"));
  }
  // The runtime's primary context is current: cudaFree(0) makes sure it exists.
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaFree(0): ", cudaGetErrorName(e)));
  }
  absl::StatusOr<const CudaDriver*> driver = Driver();
  if (!driver.ok()) return driver.status();
  const CudaDriver& cu = **driver;
  l->driver_ = &cu;
  CUdevice device = 0;
  KE_CU_RETURN_IF_ERROR(cu.CtxGetDevice(&device));
  DeviceLimits limits;
  int major = 0, minor = 0, value = 0;
  KE_CU_RETURN_IF_ERROR(
      cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  KE_CU_RETURN_IF_ERROR(
      cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  limits.arch = ArchForComputeCapability(absl::StrCat(major, ".", minor));
  if (limits.arch != submission.spec().target_arch()) {
    return absl::FailedPreconditionError(
        absl::StrCat("submission ", submission.id(), " was compiled for ",
                     submission.spec().target_arch(), "; this device is ", major, ".", minor));
  }
  KE_CU_RETURN_IF_ERROR(
      cu.DeviceGetAttribute(&l->sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  limits.sm_count = l->sm_count_;
  KE_CU_RETURN_IF_ERROR(
      cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device));
  limits.max_smem_per_block_optin = value;
  KE_CU_RETURN_IF_ERROR(cu.DeviceGetAttribute(&limits.max_threads_per_block,
                                              CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device));
  KE_CU_RETURN_IF_ERROR(cu.DeviceGetAttribute(
      &limits.registers_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, device));
  KE_CU_RETURN_IF_ERROR(cu.DeviceGetAttribute(
      &limits.max_blocks_per_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, device));
  if (absl::Status s = ValidateLaunchPlan(plan, limits, "launch_plan"); !s.ok()) return s;
  if (absl::Status s =
          ValidateResources(plan, submission.diagnostics().kernels(), limits, "launch_plan");
      !s.ok()) {
    return s;
  }

  l->cubin_ = cubin;
  if (absl::Status s = l->LoadModule(); !s.ok()) return s;
  return l;
}

absl::Status SubmissionLauncher::LoadModule() {
  const CudaDriver& cu = *driver_;
  const v1::LaunchPlan& plan = submission_.spec().launch_plan();
  functions_.clear();
  param_bytes_.clear();
  module_ = CudaModule();  // the old module goes first: both never hold state at once
  if (absl::Status s = ZeroScratchParams(); !s.ok()) return s;
  CUmodule module = nullptr;
  KE_CU_RETURN_IF_ERROR(cu.ModuleLoadData(&module, cubin_.data()));
  module_ = CudaModule(module);
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const std::string& lowered = submission_.diagnostics().kernels(i).lowered_name();
    CUfunction f = nullptr;
    KE_CU_RETURN_IF_ERROR(cu.ModuleGetFunction(&f, module, lowered.c_str()));
    // The module's own parameter records, checked against the binding as the PTX was at
    // registration: a record stored by another server or an older build is not trusted.
    std::vector<long long> sizes;
    for (std::size_t j = 0;; ++j) {
      std::size_t offset = 0, size = 0;
      const CUresult r = cu.FuncGetParamInfo(f, j, &offset, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) break;
      KE_CU_RETURN_IF_ERROR(r);
      sizes.push_back(static_cast<long long>(size));
      if (sizes.size() > static_cast<std::size_t>(kMaxKernelParams)) break;
    }
    const std::string field = absl::StrCat("launch_plan.kernels[", i, "]");
    if (plan.kernels(i).params().empty() && sizes.size() == 1 && OldAbiVersion(sizes[0]) != 0) {
      return absl::FailedPreconditionError(
          OldAbiRefusal(field + ".entry", lowered, OldAbiVersion(sizes[0])));
    }
    if (absl::Status s = CheckParamSizes(plan.kernels(i), sizes, field); !s.ok()) return s;
    param_bytes_.emplace_back(sizes.begin(), sizes.end());
    const std::uint32_t smem = plan.kernels(i).dynamic_smem_bytes();
    if (smem > 48 * 1024) {  // above 48 KiB a kernel must opt in
      KE_CU_RETURN_IF_ERROR(cu.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                static_cast<int>(smem)));
    }
    if (plan.kernels(i).has_cluster() && plan.kernels(i).cluster().x() > 1) {
      KE_CU_RETURN_IF_ERROR(
          cu.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0));
    }
    functions_.push_back(f);
  }
  return absl::OkStatus();
}

absl::Status SubmissionLauncher::Reload() { return LoadModule(); }

absl::Status SubmissionLauncher::ZeroScratchParams() {
  const v1::LaunchPlan& plan = submission_.spec().launch_plan();
  if (scratch_pointers_.empty()) {  // first load: one buffer per scratch parameter
    scratch_pointers_.resize(plan.kernels_size());
    for (int i = 0; i < plan.kernels_size(); ++i) {
      for (const std::uint64_t bytes : ScratchParamBytes(plan.kernels(i))) {
        CudaDeviceMemory memory;
        if (cudaError_t e = CudaDeviceMemory::Allocate(bytes, &memory); e != cudaSuccess) {
          return absl::ResourceExhaustedError(absl::StrCat("launch_plan.kernels[", i,
                                                           "].params: a scratch of ", bytes,
                                                           " bytes: ", cudaGetErrorName(e)));
        }
        scratch_pointers_[i].push_back(memory.get());
        scratch_sizes_.push_back(bytes);
        scratch_memory_.push_back(std::move(memory));
      }
    }
  }
  // Zeroed at every load, so that nothing a kernel leaves there outlives its phase. The
  // memset may run behind the host; the next phase's launches (on streams that need not wait
  // for the default one) must find it done.
  for (std::size_t j = 0; j < scratch_memory_.size(); ++j) {
    if (cudaError_t e = cudaMemset(scratch_memory_[j].get(), 0, scratch_sizes_[j]);
        e != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat("cudaMemset of a scratch parameter: ", cudaGetErrorName(e)));
    }
  }
  if (!scratch_memory_.empty()) {
    if (cudaError_t e = cudaStreamSynchronize(nullptr); e != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat("zeroing the scratch parameters: ", cudaGetErrorName(e)));
    }
  }
  return absl::OkStatus();
}

cudaError_t SubmissionLauncher::Launch(const FusedAddRmsNormArgs& args, void* scratch,
                                       cudaStream_t stream) const {
  const v1::SubmissionSpec& spec = submission_.spec();
  if (static_cast<int>(args.dtype) != DTypeOf(spec.dtype()) ||
      static_cast<int>(args.mode) != ModeOf(spec.mode()) || args.batch < 1 || args.hidden < 1) {
    return cudaErrorInvalidValue;
  }
  if (needs_scratch() && scratch == nullptr) return cudaErrorInvalidValue;
  const std::int64_t scratch_bytes =
      needs_scratch()
          ? args.batch * args.hidden * static_cast<std::int64_t>(ElementSize(args.dtype))
          : 0;
  const v1::LaunchPlan& plan = spec.launch_plan();
  CallValues call;
  call.args = &args;
  call.plan_scratch = needs_scratch() ? scratch : nullptr;
  call.plan_scratch_bytes = scratch_bytes;
  call.sm_count = sm_count_;
  call.kernel_count = plan.kernels_size();
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const v1::KernelLaunch& k = plan.kernels(i);
    const absl::StatusOr<std::int64_t> grid = GridFor(k, args.batch, sm_count_);
    if (!grid.ok()) return cudaErrorInvalidConfiguration;
    call.kernel_index = i;
    call.scratch_buffers = &scratch_pointers_[i];
    ParamBlock params;
    if (!BindParams(k, param_bytes_[i], call, &params)) return cudaErrorInvalidValue;
    void** kernel_args = params.pointers();
    CUlaunchAttribute attrs[2] = {};
    unsigned n = 0;
    // Only a kernel that waits for its predecessor may overlap it. ValidateResources refuses
    // the others at load already (a record stored before the compile reported the wait
    // included); checked again here so that no path launches one with the attribute.
    if (k.pdl() && i < submission_.diagnostics().kernels_size() &&
        submission_.diagnostics().kernels(i).waits_for_grid_dependency()) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    if (k.has_cluster() && k.cluster().x() > 1) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = k.cluster().x();
      attrs[n].value.clusterDim.y = 1;
      attrs[n].value.clusterDim.z = 1;
      ++n;
    }
    CUlaunchConfig config = {};
    config.gridDimX = static_cast<unsigned>(*grid);
    config.gridDimY = 1;
    config.gridDimZ = 1;
    config.blockDimX = k.block_size();
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = k.dynamic_smem_bytes();
    config.hStream = reinterpret_cast<CUstream>(stream);
    config.attrs = n > 0 ? attrs : nullptr;
    config.numAttrs = n;
    const CUresult r = driver_->LaunchKernelEx(&config, functions_[i], kernel_args, nullptr);
    // CUresult and cudaError_t share their values for the errors a launch reports
    // (1 invalid value, 701 out of resources, 700 illegal address, ...).
    if (r != CUDA_SUCCESS) return static_cast<cudaError_t>(r);
  }
  return cudaSuccess;
}

std::function<cudaError_t(const FusedAddRmsNormArgs&, void*, cudaStream_t)>
SubmissionLauncher::AsLaunchFn(std::shared_ptr<const SubmissionLauncher> launcher) {
  return [launcher](const FusedAddRmsNormArgs& args, void* scratch, cudaStream_t stream) {
    return launcher->Launch(args, scratch, stream);
  };
}

std::function<absl::Status()> SubmissionLauncher::AsResetFn(
    std::shared_ptr<SubmissionLauncher> launcher) {
  return [launcher] { return launcher->Reload(); };
}

}  // namespace kerneleval::server::submissions
