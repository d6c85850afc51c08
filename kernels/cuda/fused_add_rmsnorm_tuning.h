// Tuning entry point of the fused kernel, for the kernel benchmark and the GPU tests: the
// same kernels as LaunchFusedAddRmsNorm with the launcher's choices overridable. Not part of
// the library's public contract. Designs that lost on the H200 (persistent grids with a
// prefetched next row, several rows per thread, cache hints) are gone from the kernels; their
// numbers are in docs/results/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {

struct FusedAddRmsNormTuning {
  // Programmatic dependent launch: a kernel's launch overlaps the tail of the one before it in
  // the stream (it waits for that kernel's results before touching memory).
  bool pdl = true;
  // 0: the launcher's choice; 1, 2 or 4: this many 16-byte vectors per thread where the row
  // fits (more where it needs more, fewer where the dtype's register limit says so).
  int vecs_per_thread = 0;
  // 0: no limit; otherwise at most this many CTAs (tests use it to make every CTA loop).
  // Not applied to split rows (SplitRowKernel), whose grid is one cluster per row.
  int max_ctas = 0;
  // Rows split over a cluster of CTAs (SplitRowKernel, 16-byte vector paths): 0: the
  // launcher's table; -1: never; 1..8: that many CTAs per row with vecs_per_thread units
  // per thread (2 when 0), where that layout fits in 1024 threads.
  int ctas_per_row = 0;
};

cudaError_t LaunchFusedAddRmsNormTuned(const FusedAddRmsNormArgs& args,
                                       const FusedAddRmsNormTuning& tuning, cudaStream_t stream);

}  // namespace kerneleval
