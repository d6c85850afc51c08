// Host side of the row kernels: how a row is spread over threads, the grid, the launch with
// its attributes, and the dtype dispatch.
#pragma once

#include "rmsnorm_row_kernels.cuh"
#include "rmsnorm_split_row_kernel.cuh"

namespace kerneleval::cuda_detail {

// How a row is spread over threads. A function of the row length (and the tuning override)
// only, never of the batch: see RowSum.
struct RowLayout {
  bool two_pass = false;
  int ctas_per_row = 0;  // > 0: SplitRowKernel, a row over this many CTAs of one cluster
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

// A row over `ctas` CTAs of `vecs` units per thread: the smallest multiple of a warp that
// covers the row. Returns false where that takes more than 1024 threads.
inline bool SplitRowLayout(std::int64_t units, int ctas, int vecs, RowLayout* layout) {
  if (ctas < 1 || ctas > kMaxCtasPerRow || (vecs != 1 && vecs != 2 && vecs != 4)) return false;
  const std::int64_t per_cta = (units + ctas - 1) / ctas;
  const std::int64_t threads = ((per_cta + vecs - 1) / vecs + kWarp - 1) / kWarp * kWarp;
  if (threads > kMaxThreads) return false;
  *layout = RowLayout{};
  layout->ctas_per_row = ctas;
  layout->vecs_per_thread = vecs;
  layout->threads_per_row = static_cast<int>(threads) * ctas;
  layout->block = static_cast<int>(threads);
  return true;
}

// The launcher's split layouts, by row length in 16-byte units. From the H200 sweep of every
// (ctas, vecs) in docs/results/kernels.md (2026-12-01): one CTA per row wherever it can hold
// the row, with 2 units per thread up to 384 threads and 4 beyond (fewer, fuller threads
// keep more CTAs resident: at hidden 7168 / 8192 bf16, 4 units per thread were 3-6% faster
// at batch 16384 than 2, and within 0.1 us at batch 1); clusters only for
// rows past 4 x 1024 units, where they beat two passes over memory by 30%. Everywhere a
// shorter row could use a cluster, it measured 5-60% slower than one CTA.
struct SplitEntry {
  std::int64_t max_units;  // rows up to this many units
  int ctas;
  int vecs;
};
constexpr SplitEntry kSplitTable[] = {
    {768, 1, 2},   // hidden <= 3072 fp32, 6144 16-bit: up to 384 threads
    {4096, 1, 4},  // hidden <= 16384 fp32: up to 1024 threads
    {8192, 4, 4},  // hidden <= 32768 fp32: 4 CTAs of up to 512 threads
    {32768, 8, 4},
};
// Rows shorter than this stay on RowKernel, which packs several short rows into one CTA.
constexpr std::int64_t kMinSplitUnits = 256;

inline bool DefaultSplitRowLayout(std::int64_t units, RowLayout* layout) {
  if (units < kMinSplitUnits) return false;
  for (const SplitEntry& e : kSplitTable) {
    if (units <= e.max_units) return SplitRowLayout(units, e.ctas, e.vecs, layout);
  }
  return false;
}

struct GridChoice {
  std::int64_t blocks_needed = 0;
  int grid = 0;
  bool one_wave = true;  // every CTA is resident at once: the latency regime
};

// Grid: one CTA per row block (one cluster of ctas_per_row CTAs per row on the split path),
// the block scheduler refilling SMs as rows finish: on the H200 that beat a persistent grid
// of resident CTAs looping over rows with the next row prefetched (docs/results/kernels.md).
// RowKernel and TwoPassKernel also run on fewer CTAs than row blocks (a batch past the
// launch limit, or `max_ctas` in the tests), looping with a grid stride.
template <typename Kernel>
cudaError_t ChooseGrid(Kernel kernel, const RowLayout& layout, std::int64_t batch, int max_ctas,
                       GridChoice* choice) {
  const std::int64_t rows = layout.two_pass ? 1 : layout.rows_per_cta;
  choice->blocks_needed =
      layout.ctas_per_row > 0 ? batch * layout.ctas_per_row : (batch + rows - 1) / rows;
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
    choice->one_wave = grid <= static_cast<std::int64_t>(std::max(per_sm, 1)) * sms;
  }
  if (max_ctas > 0 && layout.ctas_per_row == 0) grid = std::min<std::int64_t>(grid, max_ctas);
  grid = std::min<std::int64_t>(grid, std::numeric_limits<int>::max());
  choice->grid = static_cast<int>(grid);
  return cudaSuccess;
}

// `cluster` > 1: CTAs grouped in clusters of that many along x (grid a multiple of it).
template <typename Kernel>
cudaError_t Launch(Kernel kernel, int grid, int block, bool pdl, cudaStream_t stream,
                   const RowParams& params, int cluster = 1) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(block));
  config.stream = stream;
  cudaLaunchAttribute attributes[2] = {};
  int count = 0;
  if (pdl) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = static_cast<unsigned>(cluster);
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = count > 0 ? attributes : nullptr;
  config.numAttrs = static_cast<unsigned>(count);
  cudaLaunchKernelEx(&config, kernel, params);
  return cudaGetLastError();
}

template <typename T, int kElems, RowOp kOp>
struct RowKernels {
  using Fn = void (*)(RowParams);
  static Fn Pick(const RowLayout& layout) {
    if (layout.two_pass) return TwoPassKernel<T, kElems, kOp>;
    if constexpr (kOp != RowOp::kNorm && kElems > 1) {
      if (layout.ctas_per_row > 0) {
        switch (layout.vecs_per_thread) {
          case 1:
            return SplitRowKernel<T, kElems, 1, kOp>;
          case 2:
            return SplitRowKernel<T, kElems, 2, kOp>;
          default:
            return SplitRowKernel<T, kElems, 4, kOp>;
        }
      }
    }
    switch (layout.vecs_per_thread) {
      case 1:
        return RowKernel<T, kElems, 1, kOp>;
      case 2:
        return RowKernel<T, kElems, 2, kOp>;
      default:
        if constexpr (MaxVecsPerThread<T, kElems>() >= 4) {
          return RowKernel<T, kElems, 4, kOp>;
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
