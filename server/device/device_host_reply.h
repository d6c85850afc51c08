// The device host's answers, converted once in each direction: the host writes its
// backend's status and Measurement into the protocol messages, the server reads them back.
// Every field of internal::MeasureReply crosses here and nowhere else, so a field added to
// the message but not to these functions fails the round-trip test
// (tests/integration/evaluation_path_test.cc) instead of being dropped on the GPU path.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/internal/device_host.pb.h"
#include "server/device/backend.h"

namespace kerneleval::server {

void ToProto(const absl::Status& status, internal::HostStatus* out);
absl::Status FromProto(const internal::HostStatus& status);

// The host's side: the call's status, its measurement when it succeeded, and whether the
// device is still healthy (false: the host exits and the server starts another).
internal::MeasureReply ToMeasureReply(const absl::StatusOr<Measurement>& m, bool healthy);

// The server's side: the measurement as the host's backend took it. The status and health
// are the caller's to read; so is the time spent in the link (device_host_seconds, and the
// copies through the shared region), which only the server sees.
Measurement FromMeasureReply(const internal::MeasureReply& reply);

}  // namespace kerneleval::server
