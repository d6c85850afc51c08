// The backend's options for a resolved v1::Protocol, and back. A device host receives the
// protocol itself (proto/kerneleval/internal/device_host.proto) and converts it here, so the
// pair is the only place that maps their fields (a test round-trips every field of
// v1::Protocol that a backend reads: tests/integration/evaluation_path_test.cc).
#pragma once

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// ToProtocol leaves the fields MeasureOptions does not carry (seed, copy bandwidth, time cap)
// unset; should_stop, tenant and the call checks' tolerance do not travel in it.
MeasureOptions ToMeasureOptions(const v1::Protocol& protocol);
v1::Protocol ToProtocol(const MeasureOptions& options);

}  // namespace kerneleval::server
