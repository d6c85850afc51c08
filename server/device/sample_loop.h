// The timing protocol shared by every backend: warm-up, then a fixed number of timed calls
// or adaptive stopping (minimum samples, target relative spread, time cap).
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// `timed_call` performs one sample's work and returns its duration in seconds (per call).
// Warm-up calls go through the same function and are discarded. Stops early, with
// `stopped_early` set, when options.should_stop says so.
absl::StatusOr<Measurement> CollectSamples(
    const MeasureOptions& options, const std::function<absl::StatusOr<double>()>& timed_call);

}  // namespace kerneleval::server
