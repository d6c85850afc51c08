// A submission's launch plan against the limits of a device: pure functions, so that every
// rule is tested on the CPU and a plan is refused before anything reaches a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::server::submissions {

inline constexpr int kMaxKernels = 4;

// What a plan is checked against. The caller fills it from the device (v1::Device and a few
// CUDA attributes) or takes the reference part of an arch.
struct DeviceLimits {
  std::string arch;  // sm_90a, sm_100a
  int sm_count = 0;
  int max_threads_per_block = 1024;  // cudaDevAttrMaxThreadsPerBlock
  // cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on H100 / H200 / B200.
  std::int64_t max_smem_per_block_optin = 232448;
  int max_cluster_size = 8;      // portable cluster size (16 needs a non-portable opt-in)
  int registers_per_sm = 65536;  // cudaDevAttrMaxRegistersPerMultiprocessor
  int max_blocks_per_sm = 32;    // cudaDevAttrMaxBlocksPerMultiprocessor
};

// The reference part of an arch: sm_90a an H100 SXM (132 SMs), sm_100a a B200 (148 SMs).
// INVALID_ARGUMENT naming `field` for any other arch.
absl::StatusOr<DeviceLimits> LimitsForArch(const std::string& arch, const std::string& field);

// From a CUDA device's description: its compute capability gives the arch (9.0 -> sm_90a,
// 10.0 -> sm_100a), its SM count replaces the reference one. FAILED_PRECONDITION for a CPU
// device or an unsupported part.
absl::StatusOr<DeviceLimits> LimitsForDevice(const v1::Device& device);

// The plan alone against the limits: 1..4 kernels; each an entry, a block size that is a
// multiple of 32 within the device's maximum, exactly one grid rule (rows_per_block >= 1, or
// ctas_per_sm within the blocks an SM can hold), dynamic shared memory within the opt-in
// maximum, a one-dimensional cluster within the portable size. INVALID_ARGUMENT names
// `field`.kernels[i].<field>.
absl::Status ValidateLaunchPlan(const v1::LaunchPlan& plan, const DeviceLimits& limits,
                                const std::string& field);

// The plan with the compiled kernels' resources (same order as the plan): static plus
// dynamic shared memory within the opt-in maximum, registers x block size within an SM's
// register file, and a `pdl` kernel that can execute griddepcontrol.wait. Spills are
// reported, not refused.
absl::Status ValidateResources(
    const v1::LaunchPlan& plan,
    const google::protobuf::RepeatedPtrField<v1::KernelResources>& kernels,
    const DeviceLimits& limits, const std::string& field);

// The grid of one kernel for a workload of `batch` rows on a device of `sm_count` SMs,
// rounded up to a multiple of the cluster size. INVALID_ARGUMENT when it does not fit a
// one-dimensional grid (2^31 - 1 CTAs).
absl::StatusOr<std::int64_t> GridFor(const v1::KernelLaunch& kernel, std::int64_t batch,
                                     int sm_count);

}  // namespace kerneleval::server::submissions
