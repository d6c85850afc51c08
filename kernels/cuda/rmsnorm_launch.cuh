// Host side of the row kernels: how a row is spread over threads, the grid, the launch with
// its attributes, and the dtype dispatch.
#pragma once

#include "rmsnorm_row_kernels.cuh"

namespace kerneleval::cuda_detail {

// How a row is spread over threads. A function of the row length (and the tuning override)
// only, never of the batch: see RowSum.
struct RowLayout {
  bool two_pass = false;
  int rows_per_thread = 1;  // > 1: MultiRowKernel, one CTA per row group
  int vecs_per_thread = 1;
  int threads_per_row = 0;
  int rows_per_cta = 1;
  int block = 0;
};

// The register path holds up to 4 units per thread at 1024 threads, except 16-bit vectors:
// 4 of those (32 elements) spill on sm_90a at the 64 registers that 1024 threads allow, so
// they stop at 2 (hidden <= 16384). Longer rows are streamed twice. Fewer units per thread
// spread a row over more threads, which is what the latency of small batches wants; at
// hidden 2048 bf16 it is one 16-byte vector per thread.
template <typename T, int kElems>
constexpr int MaxVecsPerThread() {
  return sizeof(T) == 2 && kElems > 1 ? 2 : 4;
}
constexpr int kTwoPassThreads = 1024;

inline RowLayout ChooseRowLayout(std::int64_t units, int forced_vecs_per_thread,
                                 int max_vecs_per_thread) {
  RowLayout layout;
  if (units > static_cast<std::int64_t>(max_vecs_per_thread) * kMaxThreads) {
    layout.two_pass = true;
    layout.threads_per_row = kTwoPassThreads;
    layout.block = kTwoPassThreads;
    return layout;
  }
  // Two units per thread once a row has more than 128: at hidden 2048 bf16 that is 128
  // threads per row, which measured ~5% faster than 256 at small batches and no slower at
  // large ones on the H200 (a shorter reduction, fewer warps to launch).
  const int needed = units <= kMaxThreads ? 1 : units <= 2 * kMaxThreads ? 2 : 4;
  int vpt = std::max(needed, units <= 128 ? 1 : 2);
  if (forced_vecs_per_thread == 1 || forced_vecs_per_thread == 2 || forced_vecs_per_thread == 4) {
    vpt = std::max(needed, forced_vecs_per_thread);
  }
  vpt = std::min(vpt, max_vecs_per_thread);
  layout.vecs_per_thread = vpt;
  const int threads = static_cast<int>((units + vpt - 1) / vpt);
  int tpr = 1;
  if (threads <= kWarp) {
    while (tpr < threads) tpr *= 2;
  } else {
    tpr = (threads + kWarp - 1) / kWarp * kWarp;
  }
  layout.threads_per_row = tpr;
  // At least 128 threads per CTA so that short rows do not leave the CTA slots of an SM
  // (at most 32) as the limit on occupancy.
  layout.rows_per_cta = tpr >= 128 ? 1 : 128 / tpr;
  layout.block = tpr * layout.rows_per_cta;
  return layout;
}

struct GridChoice {
  std::int64_t blocks_needed = 0;
  int grid = 0;
  bool one_wave = true;     // every CTA is resident at once: the latency regime
  bool persistent = false;  // fewer CTAs than row blocks: each CTA loops
};

// Grid: one CTA per row block. With `persistent`, at most as many CTAs as are resident,
// each looping over row blocks with the next row prefetched; on the H200 that lost to one
// CTA per row block (the block scheduler balances SMs better than a fixed split, and the
// prefetching kernel needs 40 registers against 32), so it is a tuning option.
template <typename Kernel>
cudaError_t ChooseGrid(Kernel kernel, const RowLayout& layout, std::int64_t batch, bool persistent,
                       int max_ctas, GridChoice* choice) {
  const std::int64_t rows = layout.two_pass ? 1 : layout.rows_per_cta * layout.rows_per_thread;
  choice->blocks_needed = (batch + rows - 1) / rows;
  std::int64_t grid = choice->blocks_needed;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  if (grid > sms) {
    int per_sm = 0;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, layout.block, 0);
    if (err != cudaSuccess) return err;
    const std::int64_t resident = static_cast<std::int64_t>(std::max(per_sm, 1)) * sms;
    choice->one_wave = grid <= resident;
    if (persistent) grid = std::min(grid, resident);
  }
  if (max_ctas > 0) grid = std::min<std::int64_t>(grid, max_ctas);
  grid = std::min<std::int64_t>(grid, std::numeric_limits<int>::max());
  choice->grid = static_cast<int>(grid);
  choice->persistent = grid < choice->blocks_needed;
  return cudaSuccess;
}

template <typename Kernel>
cudaError_t Launch(Kernel kernel, int grid, int block, bool pdl, cudaStream_t stream,
                   const RowParams& params) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(block));
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = pdl ? &attribute : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, params);
  return cudaGetLastError();
}

template <typename T, int kElems, RowOp kOp>
struct RowKernels {
  using Fn = void (*)(RowParams);
  static Fn Pick(const RowLayout& layout, bool prefetch) {
    if (layout.two_pass) return TwoPassKernel<T, kElems, kOp>;
    if (layout.rows_per_thread == 2) return MultiRowKernel<T, kElems, 2, kOp>;
    if (layout.rows_per_thread == 4) return MultiRowKernel<T, kElems, 4, kOp>;
    switch (layout.vecs_per_thread) {
      case 1:
        return prefetch ? RowKernel<T, kElems, 1, kOp, true> : RowKernel<T, kElems, 1, kOp, false>;
      case 2:
        return prefetch ? RowKernel<T, kElems, 2, kOp, true> : RowKernel<T, kElems, 2, kOp, false>;
      default:
        if constexpr (MaxVecsPerThread<T, kElems>() >= 4) {
          return RowKernel<T, kElems, 4, kOp, false>;
        } else {
          return nullptr;  // ChooseRowLayout never picks it
        }
    }
  }
};

inline bool Aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Calls f(T{}) with the storage type of `dtype`; returns cudaErrorInvalidValue for an unknown
// dtype.
template <typename F>
cudaError_t DispatchDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16:
      return f(__nv_bfloat16{});
    case DType::kFP16:
      return f(__half{});
    case DType::kFP32:
      return f(float{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace kerneleval::cuda_detail
