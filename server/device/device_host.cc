#include "server/device/device_host.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/conversions.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kerneleval/internal/device_host.pb.h"
#include "server/device/device_host_channel.h"
#include "server/device/device_host_reply.h"
#include "server/device/measure_options.h"

namespace kerneleval::server {
namespace {

// The slot's bytes, or null when absent; false when it lies outside the region.
bool SlotPointer(const internal::Slot& slot, SharedRegion& region, unsigned char** out) {
  *out = nullptr;
  if (slot.bytes() == 0) return true;
  if (slot.offset() > region.data_bytes() || slot.bytes() > region.data_bytes() - slot.offset()) {
    return false;
  }
  *out = region.data() + slot.offset();
  return true;
}

absl::StatusOr<Measurement> Run(Backend& backend, SharedRegion& region,
                                const internal::MeasureCall& call) {
  if (call.region_bytes() != region.total_bytes()) {
    // Pinned once per mapping, not per call: registration costs about as much as a copy.
    if (region.data_bytes() > 0) backend.UnpinHostMemory(region.data());
    if (absl::Status s = region.MapSize(call.region_bytes()); !s.ok()) return s;
    if (region.data_bytes() > 0) backend.PinHostMemory(region.data(), region.data_bytes());
  }
  unsigned char *hidden_states, *residual, *weight, *output, *residual_out;
  if (!SlotPointer(call.hidden_states(), region, &hidden_states) ||
      !SlotPointer(call.residual(), region, &residual) ||
      !SlotPointer(call.weight(), region, &weight) ||
      !SlotPointer(call.output(), region, &output) ||
      !SlotPointer(call.residual_out(), region, &residual_out)) {
    return absl::InternalError("device host: a tensor lies outside the shared region");
  }
  Problem problem;
  ASSIGN_OR_RETURN(problem.dtype, DTypeFromProto(call.dtype(), "MeasureCall.dtype"));
  ASSIGN_OR_RETURN(problem.mode, ModeFromProto(call.mode(), "MeasureCall.mode"));
  problem.batch = call.batch();
  problem.hidden = call.hidden();
  problem.eps = call.eps();
  MeasureOptions options = ToMeasureOptions(call.protocol());
  options.check_calls = call.check_calls();
  options.check_tolerance = call.check_tolerance();
  if (call.has_submission()) {
    RETURN_IF_ERROR(backend.AddSubmission(
        SubmittedKernel{call.submission().submission(), call.submission().cubin()}));
  }
  options.should_stop = [&region] { return region.stop_flag().load() != 0; };
  return backend.Measure(problem, HostInputs{hidden_states, residual, weight},
                         HostOutputs{output, residual_out}, call.implementation(), options);
}

}  // namespace

int ServeDeviceHost(Backend& backend, int channel_fd, int region_fd) {
  HostChannel channel(channel_fd);
  SharedRegion region = SharedRegion::Adopt(region_fd);

  internal::HostIdentity identity;
  *identity.mutable_device() = backend.Describe();
  for (v1::Implementation& impl : backend.Implementations()) {
    *identity.add_implementations() = std::move(impl);
  }
  identity.set_driver_version(backend.DriverVersion());
  identity.set_runtime_version(backend.RuntimeVersion());
  if (!channel.Send(identity).ok()) return 1;

  internal::HostReady ready;
  const absl::Status warm = backend.WarmUp();
  ToProto(warm, ready.mutable_warm_up());
  ready.set_copy_bytes_per_second(backend.MeasuredCopyBandwidth());
  ready.set_timer_status(backend.TimerStatus());
  if (!channel.Send(ready).ok() || !warm.ok()) return 1;

  for (;;) {
    internal::MeasureCall call;
    // The next call of a client that sends one after another comes soon after the reply:
    // polled for a while where cores allow, it starts without a process wake-up.
    const absl::Status received =
        channel.Receive(&call, absl::InfiniteDuration(), nullptr, ReplySpin());
    if (received.code() == absl::StatusCode::kUnavailable) return 0;  // the server is done
    if (!received.ok()) {
      LogError(absl::StrCat(backend.name(), ": ", received.ToString()));
      return 1;
    }
    const absl::StatusOr<Measurement> m = Run(backend, region, call);
    const internal::MeasureReply reply = ToMeasureReply(m, backend.Healthy());
    if (!channel.Send(reply).ok()) return 1;
    if (!reply.healthy()) {
      LogError(absl::StrCat(backend.name(),
                            ": the device faulted; exiting so that the server starts a new host"));
      // No destructors: releasing memory and streams through a poisoned context can only
      // fail or stall, and the driver reclaims all of it when the process ends.
      std::_Exit(3);
    }
  }
}

}  // namespace kerneleval::server
