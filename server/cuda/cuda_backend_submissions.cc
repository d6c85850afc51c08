// CudaBackend::AddSubmission: a registered submission becomes one more implementation of
// the device, inside the device host process.
#include "absl/strings/str_cat.h"
#include "server/cuda/cuda_backend.h"
#include "server/submissions/cuda_launcher.h"

namespace kerneleval::server {

absl::Status CudaBackend::AddSubmission(const SubmittedKernel& kernel) {
  if (!submissions_allowed_) return Backend::AddSubmission(kernel);
  const std::string& id = kernel.submission.id();
  for (const CudaImplementation& impl : impls_) {
    if (impl.name == id) return absl::OkStatus();  // content-addressed: already this code
  }
  if (cudaError_t e = cudaSetDevice(ordinal_); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat(name_, ": cudaSetDevice: ", cudaGetErrorName(e)));
  }
  absl::StatusOr<std::unique_ptr<submissions::SubmissionLauncher>> launcher =
      submissions::SubmissionLauncher::Load(kernel.submission, kernel.cubin);
  if (!launcher.ok()) {
    return absl::Status(launcher.status().code(),
                        absl::StrCat("submission ", id, ": ", launcher.status().message()));
  }
  CudaImplementation impl;
  impl.name = id;
  impl.description = absl::StrCat("submitted kernel ", kernel.submission.spec().name());
  impl.needs_scratch = (*launcher)->needs_scratch();
  std::shared_ptr<submissions::SubmissionLauncher> loaded(std::move(*launcher));
  impl.launch = submissions::SubmissionLauncher::AsLaunchFn(loaded);
  impl.reset = submissions::SubmissionLauncher::AsResetFn(loaded);
  // Shares the launcher's ownership: the image lives as long as either.
  impl.cubin = std::shared_ptr<const std::string>(loaded, &loaded->cubin());
  impl.test_only = true;  // never launched by WarmUp, run only when named
  impl.submitted = true;
  impls_.push_back(std::move(impl));
  return absl::OkStatus();
}

}  // namespace kerneleval::server
