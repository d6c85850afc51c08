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
  RegisterRow<kDType, kVec, 2, false>(p, row, static_cast<int>(p.hidden / kVec), partials);
}

template __global__ void direct_rows<KERNELEVAL_DTYPE_BF16>(const kerneleval_params);

// Leaner still, bf16 only: 32-bit row offsets from `hidden` alone (contiguous rows), the
// fewest parameters read before the first load, and __launch_bounds__ instead of a register
// cap. If the rest of the gap is the kernel's own arithmetic, this entry closes it; if it
// does not, the rest is the launch path. kProbe reads one more parameter before the first
// load: 1 `dtype`, 2 `flags`. In the block as first extended (flags appended) they were at
// offsets 108 and 128, and only the second cost anything (~0.05 us); ABI version 2 moved
// flags to offset 40, beside the pointers, and dtype to 68. The body takes any parameter
// block with these fields: launch_path_bench also runs it from a smaller one.
template <int kProbe, typename Params>
__device__ __forceinline__ void LeanRow(const Params& p) {
  __shared__ float partials[kMaxWarps];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if constexpr (kProbe == 1) {
    if (p.dtype != KERNELEVAL_DTYPE_BF16) return;
  }
  if constexpr (kProbe == 2) {
    if ((p.flags & KERNELEVAL_FLAG_ROWS_ALIGNED16) == 0) return;
  }
  using T = Traits<KERNELEVAL_DTYPE_BF16>;
  using P = Pack<unsigned short, 8>;
  const unsigned row = blockIdx.x;
  if (row >= static_cast<unsigned>(p.batch)) return;
  const unsigned units = static_cast<unsigned>(p.hidden) / 8;
  const P* x = static_cast<const P*>(p.hidden_states) + row * units;
  const P* r = static_cast<const P*>(p.residual) + row * units;
  P* out = static_cast<P*>(p.output) + row * units;
  const P* w = static_cast<const P*>(p.weight);
  const unsigned i0 = threadIdx.x, i1 = threadIdx.x + blockDim.x;
  P x0, r0, x1, r1;
  if (i0 < units) x0 = x[i0], r0 = r[i0];
  if (i1 < units) x1 = x[i1], r1 = r[i1];
  float s0[8], s1[8], sum_sq = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    s0[e] = i0 < units ? T::ToFloat(x0.e[e]) + T::ToFloat(r0.e[e]) : 0.f;
    s1[e] = i1 < units ? T::ToFloat(x1.e[e]) + T::ToFloat(r1.e[e]) : 0.f;
    sum_sq += s0[e] * s0[e] + s1[e] * s1[e];
  }
  P w0, w1;
  if (i0 < units) w0 = LoadWeight(w + i0);
  if (i1 < units) w1 = LoadWeight(w + i1);
  const float inv_rms = rsqrtf(BlockSum(sum_sq, partials) / static_cast<float>(p.hidden) + p.eps);
  P o0, o1;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    o0.e[e] = T::FromFloat(s0[e] * inv_rms * T::ToFloat(w0.e[e]));
    o1.e[e] = T::FromFloat(s1[e] * inv_rms * T::ToFloat(w1.e[e]));
  }
  if (i0 < units) out[i0] = o0;
  if (i1 < units) out[i1] = o1;
}

template <int kProbe>
__global__ void __launch_bounds__(128) lean_rows_probe(const kerneleval_params p) {
  LeanRow<kProbe>(p);
}

template __global__ void lean_rows_probe<0>(const kerneleval_params);
template __global__ void lean_rows_probe<1>(const kerneleval_params);
template __global__ void lean_rows_probe<2>(const kerneleval_params);

// The example's fast path alone (no GeneralRow beside it), with the same register cap and
// checks: if it matches lean_rows, what the example pays beyond it is the rest of its code.
template <int kDType>
__global__ void __maxnreg__(40) flat_rows(const kerneleval_params p) {
  __shared__ float partials[kMaxWarps];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long row = blockIdx.x;
  if (row >= p.batch || p.dtype != kDType) return;
  constexpr int kVec = 16 / sizeof(typename Traits<kDType>::Raw);
  RegisterRow<kDType, kVec, 2, true>(p, row, static_cast<int>(p.hidden) / kVec, partials);
}

template __global__ void flat_rows<KERNELEVAL_DTYPE_BF16>(const kerneleval_params);
