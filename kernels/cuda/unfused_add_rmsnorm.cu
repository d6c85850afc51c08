// The unfused two-kernel baseline, written the way an eager framework runs the operation:
// kernel 1 adds hidden_states and residual and stores the sum rounded to the dtype; kernel 2
// reads that rounded sum back and normalizes it (so the variance comes from the rounded sum,
// unlike the fused kernel). Both kernels use 16-byte accesses where alignment allows.
//
// Where the sum goes: for kOutput, `scratch` ([batch, hidden] of the dtype, required); for the
// modes that write residual_out, residual_out itself (scratch is unused and may be null), as
// the header says. In kInPlace that is the residual buffer: kernel 1 is elementwise, so each
// element is read before the same thread overwrites it, and kernel 2 writes output (the
// hidden_states buffer), which kernel 1 no longer needs.
#include <algorithm>
#include <cstdint>
#include <limits>

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
using cuda_detail::Vec;

constexpr int kAddThreads = 256;
// Resident CTAs per SM for the grid-stride add: 2048 threads per SM on Hopper and Blackwell.
constexpr int kAddCtasPerSm = 8;

// Plain loads and stores, as a framework's elementwise add issues them.
template <typename T, int kElems>
__global__ void __launch_bounds__(kAddThreads)
    AddKernel(const void* x_ptr, const void* r_ptr, void* sum_ptr, std::int64_t units) {
  using P = Vec<T, kElems>;
  const auto* x = static_cast<const P*>(x_ptr);
  const auto* r = static_cast<const P*>(r_ptr);
  auto* sum = static_cast<P*>(sum_ptr);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < units;
       i += stride) {
    const P xv = x[i];
    const P rv = r[i];
    float s[kElems];
#pragma unroll
    for (int e = 0; e < kElems; ++e) s[e] = cuda_detail::Get(xv, e) + cuda_detail::Get(rv, e);
    sum[i] = cuda_detail::Make<T>(s);
  }
}

template <typename T>
cudaError_t LaunchAdd(const FusedAddRmsNormArgs& args, void* sum, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const std::int64_t n = args.batch * args.hidden;
  const bool vector =
      n % kVec == 0 && Aligned16(args.hidden_states) && Aligned16(args.residual) && Aligned16(sum);
  const std::int64_t units = vector ? n / kVec : n;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  const std::int64_t grid = std::min<std::int64_t>((units + kAddThreads - 1) / kAddThreads,
                                                   static_cast<std::int64_t>(sms) * kAddCtasPerSm);
  const auto kernel = vector ? AddKernel<T, kVec> : AddKernel<T, 1>;
  kernel<<<static_cast<unsigned>(grid), kAddThreads, 0, stream>>>(args.hidden_states, args.residual,
                                                                  sum, units);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchNorm(const FusedAddRmsNormArgs& args, const void* sum, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vector =
      args.hidden % kVec == 0 && Aligned16(sum) && Aligned16(args.weight) && Aligned16(args.output);
  const std::int64_t units = vector ? args.hidden / kVec : args.hidden;
  const RowLayout layout = ChooseRowLayout(
      units, 0,
      vector ? cuda_detail::MaxVecsPerThread<T, kVec>() : cuda_detail::MaxVecsPerThread<T, 1>());
  const auto kernel = vector ? RowKernels<T, kVec, RowOp::kNorm>::Pick(layout)
                             : RowKernels<T, 1, RowOp::kNorm>::Pick(layout);
  RowParams p = {};
  p.x = sum;
  p.w = args.weight;
  p.out = args.output;
  p.batch = args.batch;
  p.units = static_cast<int>(units);
  p.threads_per_row = layout.threads_per_row;
  p.rows_per_cta = layout.rows_per_cta;
  p.inv_hidden = 1.f / static_cast<float>(args.hidden);
  p.eps = args.eps;
  GridChoice grid;
  const cudaError_t err = ChooseGrid(kernel, layout, args.batch, 0, &grid);
  if (err != cudaSuccess) return err;
  return cuda_detail::Launch(kernel, grid.grid, layout.block, /*pdl=*/false, stream, p);
}

}  // namespace

cudaError_t LaunchUnfusedAddRmsNorm(const FusedAddRmsNormArgs& args, void* scratch,
                                    cudaStream_t stream) {
  if (args.mode != Mode::kOutput && args.mode != Mode::kOutputAndResidual &&
      args.mode != Mode::kInPlace) {
    return cudaErrorInvalidValue;
  }
  if (args.batch < 1 || args.hidden < 1 || args.hidden > std::numeric_limits<int>::max() ||
      args.hidden_states == nullptr || args.residual == nullptr || args.weight == nullptr ||
      args.output == nullptr) {
    return cudaErrorInvalidValue;
  }
  void* sum = WritesResidual(args.mode) ? args.residual_out : scratch;
  if (sum == nullptr) return cudaErrorInvalidValue;
  return cuda_detail::DispatchDType(args.dtype, [&](auto t) {
    using T = decltype(t);
    const cudaError_t err = LaunchAdd<T>(args, sum, stream);
    if (err != cudaSuccess) return err;
    return LaunchNorm<T>(args, sum, stream);
  });
}

}  // namespace kerneleval
