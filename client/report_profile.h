// A profile (v1::ProfileReport) as the lines the table and text reports print under a
// result: per kernel its launch, throughput shares, memory, occupancy, top stalls and
// roofline point, then each piece of advice with the figure it rests on.
#pragma once

#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client::report_internal {

namespace v1 = ::kerneleval::v1;

// Empty when no profile was asked for; one line with the reason when it was unavailable.
std::vector<std::string> ProfileLines(const v1::ProfileReport& profile);

}  // namespace kerneleval::client::report_internal
