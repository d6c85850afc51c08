// A hand-built report for the client's format tests: two implementations at three batches
// with every figure a server fills in, and a kernel profile as the server derives it
// (figures consistent with one another: the point lies under its roof).
#pragma once

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client {

v1::BenchmarkReport SampleReport();

// Adds to `result` a profile of one kernel: launch, throughput, memory, occupancy, four
// stall reasons, the roofline point, one piece of advice and one source line.
void AddSampleProfile(v1::WorkloadResult* result);

}  // namespace kerneleval::client
