// A kernel's profile from what the device counted: the CUPTI metrics a profile asks for,
// and every figure derived from them (throughput shares, memory workload, occupancy, warp
// stalls, the roofline point) with the advice its rules give (docs/profile.md).
//
// Pure functions: no CUDA, no CUPTI (the occupancy calculator is the toolkit's header-only
// cuda_occupancy.h), so that the figures and rules are tested on counters recorded from a
// real device, on any machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

// The metrics a profile reads, by CUPTI's names: the ones a chip lacks are left out by the
// device and their figures left unset.
const std::vector<std::string>& ProfileMetrics();
// The warp stall reasons read (smsp__warps_issue_stalled_<reason>.sum).
const std::vector<std::string>& StallReasons();

// The resident blocks per SM a launch allows on `device` and what caps them (the CUDA
// occupancy calculator), with the waves its grid makes. Achieved occupancy is left unset.
v1::ProfileOccupancy TheoreticalOccupancy(const v1::ProfileDevice& device,
                                          const v1::ProfiledLaunch& launch);

// Fills every derived figure of each kernel of `report` (launch and counters as the device
// reported them) and its advice. `declared_read_bytes`, `declared_write_bytes`: what the
// definition must read and write per call, 0 when unknown; the call's DRAM traffic (all its
// kernels) is set beside them.
void DeriveProfile(std::uint64_t declared_read_bytes, std::uint64_t declared_write_bytes,
                   v1::ProfileReport* report);

// The rules, each firing with the figure it rests on, over a kernel whose figures are
// derived; `call_kernels` is how many kernels the call launched.
std::vector<v1::ProfileAdvice> AdviseKernel(const v1::ProfileDevice& device,
                                            const v1::KernelProfile& kernel,
                                            std::size_t call_kernels);

}  // namespace kerneleval::server
