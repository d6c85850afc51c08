// A result's profile in the HTML report: its lines (client/report_profile.h), and per kernel
// a bar chart of the warp stall reasons and the kernel's point on the DRAM roofline, as
// inline SVG.
#pragma once

#include <string>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client::report_internal {

namespace v1 = ::kerneleval::v1;

// Empty when the result has no profile.
std::string ProfileHtml(const v1::WorkloadResult& result);

}  // namespace kerneleval::client::report_internal
