// Appended to examples/submissions/fused_rows_vec16.cu by scripts/gpu-overhead.sh: the same
// row with the per-thread dispatch removed (no alignment or stride checks, no one-vector or
// two-pass path), for rows of exactly two 16-byte vectors per thread. If the example's gap
// to the built-in at small batches is its dispatch, this entry closes it.
template <int kDType>
__global__ void __maxnreg__(40) direct_rows(const kerneleval_params p) {
  __shared__ float partials[kMaxWarps];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  RegisterRow<kDType, kVec, 2>(p, row, static_cast<int>(p.hidden / kVec), partials);
}

template __global__ void direct_rows<KERNELEVAL_DTYPE_BF16>(const kerneleval_params);
