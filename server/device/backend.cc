#include "server/device/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/bounded_text.h"
#include "common/enum_names.h"
#include "common/status_macros.h"

namespace kerneleval::server {

bool Capabilities::SupportsTimer(v1::Timer timer) const {
  return timer == v1::TIMER_UNSPECIFIED ||
         std::find(timers.begin(), timers.end(), timer) != timers.end();
}

Capabilities CapabilitiesOfKind(absl::string_view kind) {
  Capabilities c;
  c.kind = std::string(kind);
  if (kind == "cuda") {
    c.gpu = true;
    c.timers = {v1::TIMER_CUPTI, v1::TIMER_CUDA_EVENTS};
    c.graph_replay = true;
    c.call_checks = true;
    c.submissions = true;
    c.profiles = true;
  } else if (kind == "cpu") {
    c.timers = {v1::TIMER_HOST_CLOCK};
  }
  return c;
}

absl::Status CheckTimer(const Capabilities& caps, v1::Timer timer, const std::string& device,
                        absl::string_view field) {
  if (caps.SupportsTimer(timer)) return absl::OkStatus();
  if (timer == v1::TIMER_HOST_CLOCK) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": host_clock is for the CPU backend, not ", device));
  }
  if (!caps.gpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", TimerShortName(timer), " needs a CUDA device, not ", device));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", TimerShortName(timer), " is not available on ", device));
}

absl::Status CheckProtocolFits(const Capabilities& caps, const ProtocolNeeds& needs,
                               const std::string& device) {
  if (needs.graph && !caps.graph_replay) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol.cuda_graph: graph replay needs a CUDA device, not ", device));
  }
  if (needs.check_calls && !caps.call_checks) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol.check_every_call: calls are checked on CUDA devices, not ", device));
  }
  if (needs.profile) RETURN_IF_ERROR(CheckProfile(caps, device, "protocol.profile"));
  return CheckTimer(caps, needs.timer, device, "protocol.timer");
}

absl::Status CheckProfile(const Capabilities& caps, const std::string& device,
                          absl::string_view field) {
  if (caps.profiles) return absl::OkStatus();
  // A valid request the chosen device cannot serve: it has no hardware counters to read.
  return absl::FailedPreconditionError(
      absl::StrCat(field, ": kernels are profiled from the hardware counters of a CUDA device; ",
                   device, " has none"));
}

absl::Status CheckSubmissions(const Capabilities& caps, const std::string& submission_id,
                              const std::string& device, absl::string_view field) {
  if (caps.submissions) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(field, ": submission ", Quote(submission_id),
                                                    " needs a CUDA device, not ", device));
}

const Capabilities& Backend::capabilities() const {
  std::call_once(capabilities_once_,
                 [this] { capabilities_ = CapabilitiesOfKind(Describe().kind()); });
  return capabilities_;
}

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
