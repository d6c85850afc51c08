#include "server/device/device_host_reply.h"

#include <string>

namespace kerneleval::server {

void ToProto(const absl::Status& status, internal::HostStatus* out) {
  out->set_code(static_cast<int>(status.code()));
  out->set_message(std::string(status.message()));
}

absl::Status FromProto(const internal::HostStatus& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

internal::MeasureReply ToMeasureReply(const absl::StatusOr<Measurement>& m, bool healthy) {
  internal::MeasureReply reply;
  ToProto(m.status(), reply.mutable_status());
  reply.set_healthy(healthy);
  if (!m.ok()) return reply;
  reply.mutable_samples_seconds()->Assign(m->samples_seconds.begin(), m->samples_seconds.end());
  reply.set_timer(m->timer);
  reply.set_timer_note(m->timer_note);
  reply.set_stopped_early(m->stopped_early);
  *reply.mutable_clocks() = m->clocks;
  *reply.mutable_admission() = m->admission;
  *reply.mutable_dram() = m->dram;
  *reply.mutable_profile() = m->profile;
  reply.set_calls_checked(m->calls_checked);
  reply.set_call_check_failure(m->call_check_failure);
  reply.mutable_kernels()->Assign(m->kernels.begin(), m->kernels.end());
  reply.set_host_to_device_seconds(m->host_to_device_seconds);
  reply.set_device_seconds(m->device_seconds);
  reply.set_device_to_host_seconds(m->device_to_host_seconds);
  return reply;
}

Measurement FromMeasureReply(const internal::MeasureReply& reply) {
  Measurement m;
  m.samples_seconds.assign(reply.samples_seconds().begin(), reply.samples_seconds().end());
  m.timer = reply.timer();
  m.timer_note = reply.timer_note();
  m.stopped_early = reply.stopped_early();
  m.clocks = reply.clocks();
  m.admission = reply.admission();
  m.dram = reply.dram();
  m.profile = reply.profile();
  m.calls_checked = reply.calls_checked();
  m.call_check_failure = reply.call_check_failure();
  m.kernels.assign(reply.kernels().begin(), reply.kernels().end());
  m.host_to_device_seconds = reply.host_to_device_seconds();
  m.device_seconds = reply.device_seconds();
  m.device_to_host_seconds = reply.device_to_host_seconds();
  return m;
}

}  // namespace kerneleval::server
