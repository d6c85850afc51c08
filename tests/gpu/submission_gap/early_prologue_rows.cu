// Appended after direct_rows.cu by launch_path_bench and scripts/gpu-overhead.sh (step gap):
// the example's entry with its prologue moved before the PDL wait, one step at a time.
// Reading the parameter block is not a global access, so it may run while the kernel before
// this one still runs; what a kernel reads of its block only after griddepcontrol.wait is on
// the critical path of every call in a stream or graph. The built-in does the first of these
// without saying so: it reads ctas_per_row (its block's second 64-byte line) to decide on a
// cluster arrive before its wait, so that line is cached by the time the row needs `units`,
// `inv_hidden` and `eps`. Step 1 is what the example does now (docs/results/submissions-h200.md).
//   kStep 1: the row's bound tested before the wait (the block's first line);
//   kStep 2: and thread 0 prefetches the weight into L2 before the wait, which reads the
//            weight pointer (the second line) there. L2 is where the previous kernel's
//            writes land, so a prefetch there cannot return stale data; L1 could.
//   kStep 3: and every thread prefetches its own weight vectors into L2.
template <int kStep>
__device__ __forceinline__ void PrefetchWeightL2(const kerneleval_params& p) {
  using P = Pack<unsigned short, 8>;
  const P* w = static_cast<const P*>(p.weight);
  if constexpr (kStep == 2) {
    if (threadIdx.x == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(w));
  } else if constexpr (kStep == 3) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(w + threadIdx.x));
  }
}

template <int kDType, int kStep>
__global__ void __maxnreg__(48) early_rows(const kerneleval_params p) {
  __shared__ float partials[kMaxWarps];
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  PrefetchWeightL2<kStep>(p);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  constexpr unsigned kFlatRows = KERNELEVAL_FLAG_ROWS_ALIGNED16 | KERNELEVAL_FLAG_INDEX32;
  if ((p.flags & kFlatRows) != kFlatRows || p.hidden > 2ll * kVec * blockDim.x) {
    GeneralRow<kDType>(p, row, partials);
    return;
  }
  RegisterRow<kDType, kVec, 2, true>(p, row, static_cast<int>(p.hidden) / kVec, partials);
}

template __global__ void early_rows<KERNELEVAL_DTYPE_BF16, 1>(const kerneleval_params);
template __global__ void early_rows<KERNELEVAL_DTYPE_BF16, 2>(const kerneleval_params);
template __global__ void early_rows<KERNELEVAL_DTYPE_BF16, 3>(const kerneleval_params);

// The lean row with step 2's prologue: if the lean entry's 0.06 us is the same second-line
// read, this closes it.
__global__ void __launch_bounds__(128) lean_rows_early(const kerneleval_params p) {
  if (blockIdx.x >= p.batch) return;
  PrefetchWeightL2<2>(p);
  LeanRow<0>(p);
}
