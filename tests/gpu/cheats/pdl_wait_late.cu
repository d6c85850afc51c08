// Cheat: registered with --pdl, it executes griddepcontrol.wait, so it passes the
// registration rule that refuses a pdl kernel which never waits (pdl_no_wait), but only after
// its first pass has read the row: the next launch starts at its entry, and its sum of squares
// comes from whatever its input buffer held before the predecessor wrote it. Its calls
// overlap in graph replay as pdl_no_wait's did.
// Caught by: the chained calls of hot and graph replay (see pdl_no_wait.cu): where the
// overlap happens, the row's scale comes from the poison or a half-written row and the
// output fails its check.
extern "C" __global__ void __launch_bounds__(1024) pdl_wait_late(const kerneleval_params p) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long row = blockIdx.x;
  if (row >= p.batch) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    return;
  }
  __shared__ float partial[1024];
  const long long x0 = row * p.hidden_states_stride;
  const long long r0 = row * p.residual_stride;
  float sum_sq = 0.f;
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float s = Load(p.hidden_states, x0 + i, p.dtype) + Load(p.residual, r0 + i, p.dtype);
    sum_sq += s * s;
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  partial[threadIdx.x] = sum_sq;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / static_cast<float>(p.hidden) + p.eps);
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float s = Load(p.hidden_states, x0 + i, p.dtype) + Load(p.residual, r0 + i, p.dtype);
    if (p.mode != KERNELEVAL_MODE_OUTPUT)
      Store(p.residual_out, row * p.residual_out_stride + i, s, p.dtype);
    Store(p.output, row * p.output_stride + i, s * inv_rms * Load(p.weight, i, p.dtype), p.dtype);
  }
}
