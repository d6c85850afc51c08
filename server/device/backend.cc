#include "server/device/backend.h"

#include "absl/strings/str_cat.h"

namespace kerneleval::server {

bool Backend::HasImplementation(const std::string& impl) const {
  for (const v1::Implementation& i : Implementations()) {
    if (i.name() == impl) return true;
  }
  return false;
}

std::string Backend::DefaultImplementation() const {
  const std::vector<v1::Implementation> impls = Implementations();
  for (const v1::Implementation& i : impls) {
    if (i.is_default()) return i.name();
  }
  return impls.empty() ? std::string() : impls.front().name();
}

absl::Status Backend::AddSubmission(const SubmittedKernel& kernel) {
  return absl::FailedPreconditionError(
      absl::StrCat(name(),
                   ": submitted kernels run only on a CUDA device in a device host process "
                   "(--device-isolation auto or process); not loading ",
                   kernel.submission.id()));
}

}  // namespace kerneleval::server
