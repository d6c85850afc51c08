#include "server/submissions/launch_plan.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

constexpr std::int64_t kMaxGridX = std::numeric_limits<int>::max();

int ClusterSize(const v1::KernelLaunch& k) {
  const auto dim = [](std::uint32_t d) { return d == 0 ? 1 : static_cast<int>(d); };
  return k.has_cluster() ? dim(k.cluster().x()) : 1;
}

}  // namespace

absl::StatusOr<DeviceLimits> LimitsForArch(const std::string& arch, const std::string& field) {
  DeviceLimits limits;
  limits.arch = arch;
  if (arch == "sm_90a") {
    limits.sm_count = 132;
  } else if (arch == "sm_100a") {
    limits.sm_count = 148;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", Quote(arch),
                                                   " is not a supported target; use sm_90a (H100, "
                                                   "H200) or sm_100a (B200)"));
  }
  return limits;
}

absl::StatusOr<DeviceLimits> LimitsForDevice(const v1::Device& device) {
  const std::string arch = ArchForComputeCapability(device.compute_capability());
  if (device.kind() != "cuda" || arch.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("submission.device: ", Quote(device.name()), " (", device.kind(),
                     ", compute capability ", Quote(device.compute_capability()),
                     ") cannot run submissions: an sm_90 or sm_100 GPU "
                     "is needed"));
  }
  absl::StatusOr<DeviceLimits> limits = LimitsForArch(arch, "submission.device");
  if (!limits.ok()) return limits.status();
  if (device.sm_count() > 0) limits->sm_count = device.sm_count();
  return limits;
}

absl::Status ValidateLaunchPlan(const v1::LaunchPlan& plan, const DeviceLimits& limits,
                                const std::string& field) {
  if (plan.kernels().empty() || plan.kernels_size() > kMaxKernels) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".kernels: ", plan.kernels_size(),
                                                   " kernels; a plan launches 1 to ", kMaxKernels));
  }
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const v1::KernelLaunch& k = plan.kernels(i);
    const std::string at = absl::StrCat(field, ".kernels[", i, "]");
    if (absl::Status s = CheckEntry(k.entry(), at + ".entry"); !s.ok()) return s;
    const std::uint32_t block = k.block_size();
    if (block == 0 || block % 32 != 0 ||
        block > static_cast<std::uint32_t>(limits.max_threads_per_block)) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".block_size: ", block,
                                                     " must be a multiple of 32 from 32 to ",
                                                     limits.max_threads_per_block));
    }
    switch (k.grid_case()) {
      case v1::KernelLaunch::kRowsPerBlock:
        if (k.rows_per_block() == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(at, ".rows_per_block: must be at least 1"));
        }
        break;
      case v1::KernelLaunch::kCtasPerSm:
        if (k.ctas_per_sm() == 0 ||
            k.ctas_per_sm() > static_cast<std::uint32_t>(limits.max_blocks_per_sm)) {
          return absl::InvalidArgumentError(
              absl::StrCat(at, ".ctas_per_sm: ", k.ctas_per_sm(), " must be from 1 to ",
                           limits.max_blocks_per_sm, " (CTAs an SM holds)"));
        }
        break;
      case v1::KernelLaunch::GRID_NOT_SET:
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".grid: give rows_per_block or ctas_per_sm"));
    }
    if (k.dynamic_smem_bytes() > limits.max_smem_per_block_optin) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".dynamic_smem_bytes: ", k.dynamic_smem_bytes(), " is more than the ",
                       limits.max_smem_per_block_optin, " bytes a CTA may use on ", limits.arch));
    }
    if (k.has_cluster()) {
      const v1::ClusterDims& c = k.cluster();
      if (c.y() > 1 || c.z() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".cluster: grids are one-dimensional; y and z must be 0 or 1 (got ",
                         c.y(), ", ", c.z(), ")"));
      }
      if (c.x() > static_cast<std::uint32_t>(limits.max_cluster_size)) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".cluster.x: ", c.x(), " is more than the ", limits.max_cluster_size,
                         " CTAs of a portable cluster"));
      }
    }
    if (k.grid_case() == v1::KernelLaunch::kCtasPerSm) {
      const std::int64_t grid = static_cast<std::int64_t>(k.ctas_per_sm()) * limits.sm_count;
      if (grid % ClusterSize(k) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".cluster.x: ", ClusterSize(k), " does not divide the persistent grid of ", grid,
            " CTAs (", k.ctas_per_sm(), " per SM x ", limits.sm_count, " SMs)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateResources(
    const v1::LaunchPlan& plan,
    const google::protobuf::RepeatedPtrField<v1::KernelResources>& kernels,
    const DeviceLimits& limits, const std::string& field) {
  if (kernels.size() != plan.kernels_size()) {
    return absl::InternalError(absl::StrCat("compiler reported ", kernels.size(),
                                            " kernels for a plan of ", plan.kernels_size()));
  }
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const v1::KernelLaunch& k = plan.kernels(i);
    const v1::KernelResources& r = kernels[i];
    const std::string at = absl::StrCat(field, ".kernels[", i, "]");
    const std::int64_t smem = r.static_smem_bytes() + k.dynamic_smem_bytes();
    if (smem > limits.max_smem_per_block_optin) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".dynamic_smem_bytes: ", k.dynamic_smem_bytes(), " with the kernel's ",
                       r.static_smem_bytes(), " static bytes is more than the ",
                       limits.max_smem_per_block_optin, " bytes a CTA may use on ", limits.arch));
    }
    if (k.pdl() && !r.waits_for_grid_dependency()) {
      // Launched with pdl, a kernel that never waits overlaps its predecessor freely: the
      // calls of a graph replay would run side by side and be timed as if one after another.
      return absl::InvalidArgumentError(absl::StrCat(
          at, ".pdl: ", Quote(k.entry()),
          " never executes griddepcontrol.wait (cudaGridDependencySynchronize); a kernel "
          "launched with programmatic dependent launch must wait for its predecessor before "
          "touching memory it writes"));
    }
    // Registers are allocated per warp in units of 256 (8 per thread).
    const std::int64_t regs = (static_cast<std::int64_t>(r.registers()) + 7) / 8 * 8;
    if (regs * k.block_size() > limits.registers_per_sm) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".block_size: ", k.block_size(), " threads x ", r.registers(),
                       " registers do not fit the ", limits.registers_per_sm,
                       " registers of an SM; use a smaller block or __launch_bounds__"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::int64_t> GridFor(const v1::KernelLaunch& kernel, std::int64_t batch,
                                     int sm_count) {
  std::int64_t grid = 0;
  if (kernel.grid_case() == v1::KernelLaunch::kRowsPerBlock && kernel.rows_per_block() > 0) {
    grid = (batch + kernel.rows_per_block() - 1) / kernel.rows_per_block();
  } else if (kernel.grid_case() == v1::KernelLaunch::kCtasPerSm) {
    grid = static_cast<std::int64_t>(kernel.ctas_per_sm()) * sm_count;
  }
  const int cluster = ClusterSize(kernel);
  grid = (grid + cluster - 1) / cluster * cluster;
  if (grid < 1 || grid > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch_plan: a grid of ", grid, " CTAs for batch ", batch, " does not fit"));
  }
  return grid;
}

}  // namespace kerneleval::server::submissions
