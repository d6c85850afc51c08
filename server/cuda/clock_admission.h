// Admission before a workload is timed: a bounded wait until no other process has a
// context on the GPU, then device work until the SM clock has settled.
//
// Why: an idle H200 reads 345 MHz on its SM clock and ramps only under load; a suite whose
// first workload is timed right after an idle spell (input generation, the fp64 reference
// of 33M elements) measured B = 1 at 1.63 us in one run and 1.73 us in the next (5.9%).
// Ten warm-up calls of a 1.6 us kernel are ~20 us of device time, far too little to ramp.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

struct AdmissionLimits {
  // Per workload: a process that keeps an idle context open forever costs this each time.
  double max_idle_wait_seconds = 1.0;
  double max_settle_seconds = 0.5;
};

// `busy` enqueues a few milliseconds of device work and waits for it. Settled means the SM
// clock read within 15 MHz of the GPU's maximum, or unchanged (+-15 MHz) over three reads
// under load (clocks locked or capped below the maximum). Without NVML nothing is waited
// for and `checked` is false. An error of `busy` is returned as is.
absl::Status AdmitClocks(const std::string& uuid, const std::function<absl::Status()>& busy,
                         const AdmissionLimits& limits, v1::ClockAdmission* out);

}  // namespace kerneleval::server
