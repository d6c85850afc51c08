// Fused residual-add + RMSNorm: one launcher that picks the variant from the dtype, the row
// length, the batch and the pointers' alignment. Kernels are in rmsnorm_split_row_kernel.cuh
// and rmsnorm_row_kernels.cuh; the layout table is in rmsnorm_launch.cuh.
//
// Variants (named by FusedAddRmsNormVariant):
//   rows_vec16_latency     hidden % (16 B / element) == 0, all pointers 16-byte aligned, and
//                          all row CTAs resident at once. Rows of 256 or more 16-byte vectors
//                          (hidden >= 2048 bf16, 1024 fp32): one CTA per row (SplitRowKernel)
//                          of 2 vectors per thread up to 384 threads, 4 beyond (128 threads
//                          at hidden 2048 bf16), x and r summed into fp32 registers at entry,
//                          one barrier, programmatic dependent launch so that in a graph a
//                          call's launch overlaps the previous call. Shorter rows: several to a
//                          CTA (RowKernel).
//   rows_vec16_bandwidth   the same kernels when the batch needs several waves of CTAs, the
//                          block scheduler refilling SMs as rows finish.
//   cluster_rows_vec16     rows past 4096 vectors (hidden > 16384 fp32): a row over the CTAs
//                          of one thread-block cluster (4 or 8), each holding its chunk as
//                          fp32 sums in registers, partial sums exchanged through distributed
//                          shared memory; one pass over memory.
//   rows_scalar_*          element-wide accesses (RowKernel), for unaligned pointers or a
//                          hidden size that is not a multiple of the vector width.
//   two_pass_*             rows longer than the register paths hold, or unaligned long rows.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "fused_add_rmsnorm_tuning.h"
#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"
#include "rmsnorm_launch.cuh"

namespace kerneleval {
namespace {

using cuda_detail::Aligned16;
using cuda_detail::ChooseGrid;
using cuda_detail::ChooseRowLayout;
using cuda_detail::GridChoice;
using cuda_detail::RowKernels;
using cuda_detail::RowLayout;
using cuda_detail::RowOp;
using cuda_detail::RowParams;
using cuda_detail::SplitRowLayout;

bool ValidArgs(const FusedAddRmsNormArgs& args) {
  if (args.mode != Mode::kOutput && args.mode != Mode::kOutputAndResidual &&
      args.mode != Mode::kInPlace) {
    return false;
  }
  if (args.batch < 1 || args.hidden < 1 || args.hidden > std::numeric_limits<int>::max()) {
    return false;
  }
  if (args.hidden_states == nullptr || args.residual == nullptr || args.weight == nullptr ||
      args.output == nullptr) {
    return false;
  }
  return !WritesResidual(args.mode) || args.residual_out != nullptr;
}

struct Plan {
  bool vector = false;
  RowLayout layout;
  GridChoice grid;
  void (*kernel)(RowParams) = nullptr;
  RowParams params = {};
};

template <typename T>
cudaError_t MakePlan(const FusedAddRmsNormArgs& args, const FusedAddRmsNormTuning& tuning,
                     Plan* plan) {
  constexpr int kVec = 16 / sizeof(T);
  const bool writes = WritesResidual(args.mode);
  plan->vector = args.hidden % kVec == 0 && Aligned16(args.hidden_states) &&
                 Aligned16(args.residual) && Aligned16(args.weight) && Aligned16(args.output) &&
                 (!writes || Aligned16(args.residual_out));
  const std::int64_t units = plan->vector ? args.hidden / kVec : args.hidden;
  plan->layout = ChooseRowLayout(units, tuning.vecs_per_thread,
                                 plan->vector ? cuda_detail::MaxVecsPerThread<T, kVec>()
                                              : cuda_detail::MaxVecsPerThread<T, 1>());
  if (plan->vector && tuning.ctas_per_row >= 0) {
    RowLayout split;
    const bool fits =
        tuning.ctas_per_row > 0
            ? SplitRowLayout(units, tuning.ctas_per_row,
                             tuning.vecs_per_thread > 0 ? tuning.vecs_per_thread : 2, &split)
            : cuda_detail::DefaultSplitRowLayout(units, &split);
    // One cluster per row: the grid is batch x ctas_per_row CTAs, within a launch's limit.
    if (fits && args.batch <= std::numeric_limits<int>::max() / split.ctas_per_row) {
      plan->layout = split;
    }
  }
  if (plan->vector) {
    plan->kernel = writes ? RowKernels<T, kVec, RowOp::kAddNormStoreSum>::Pick(plan->layout)
                          : RowKernels<T, kVec, RowOp::kAddNorm>::Pick(plan->layout);
  } else {
    plan->kernel = writes ? RowKernels<T, 1, RowOp::kAddNormStoreSum>::Pick(plan->layout)
                          : RowKernels<T, 1, RowOp::kAddNorm>::Pick(plan->layout);
  }
  RowParams& p = plan->params;
  p.x = args.hidden_states;
  p.r = args.residual;
  p.w = args.weight;
  p.out = args.output;
  p.sum_out = writes ? args.residual_out : nullptr;
  p.batch = args.batch;
  p.units = static_cast<int>(units);
  p.threads_per_row = plan->layout.threads_per_row;
  p.rows_per_cta = plan->layout.rows_per_cta;
  p.ctas_per_row = std::max(plan->layout.ctas_per_row, 1);
  p.inv_hidden = 1.f / static_cast<float>(args.hidden);
  p.eps = args.eps;
  return ChooseGrid(plan->kernel, plan->layout, args.batch, tuning.max_ctas, &plan->grid);
}

cudaError_t MakePlan(const FusedAddRmsNormArgs& args, const FusedAddRmsNormTuning& tuning,
                     Plan* plan) {
  if (!ValidArgs(args)) return cudaErrorInvalidValue;
  return cuda_detail::DispatchDType(
      args.dtype, [&](auto t) { return MakePlan<decltype(t)>(args, tuning, plan); });
}

}  // namespace

cudaError_t LaunchFusedAddRmsNormTuned(const FusedAddRmsNormArgs& args,
                                       const FusedAddRmsNormTuning& tuning, cudaStream_t stream) {
  Plan plan;
  const cudaError_t err = MakePlan(args, tuning, &plan);
  if (err != cudaSuccess) return err;
  return cuda_detail::Launch(plan.kernel, plan.grid.grid, plan.layout.block, tuning.pdl, stream,
                             plan.params, plan.params.ctas_per_row);
}

cudaError_t LaunchFusedAddRmsNorm(const FusedAddRmsNormArgs& args, cudaStream_t stream) {
  return LaunchFusedAddRmsNormTuned(args, FusedAddRmsNormTuning{}, stream);
}

const char* FusedAddRmsNormVariant(const FusedAddRmsNormArgs& args) {
  Plan plan;
  const cudaError_t err = MakePlan(args, FusedAddRmsNormTuning{}, &plan);
  if (err == cudaErrorInvalidValue) return "invalid_arguments";
  if (err != cudaSuccess) return "cuda_error";
  if (plan.layout.two_pass) return plan.vector ? "two_pass_vec16" : "two_pass_scalar";
  if (plan.layout.ctas_per_row > 1) return "cluster_rows_vec16";
  static const char* const kNames[2][2] = {{"rows_scalar_latency", "rows_scalar_bandwidth"},
                                           {"rows_vec16_latency", "rows_vec16_bandwidth"}};
  return kNames[plan.vector ? 1 : 0][plan.grid.one_wave ? 0 : 1];
}

}  // namespace kerneleval
