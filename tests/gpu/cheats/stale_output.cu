// Cheat: computes the first call only and returns at once afterwards, leaving whatever an
// earlier call wrote.
// Caught by: outputs poisoned before every checked call (the first warm-up call already).
__device__ unsigned long long calls = 0;

extern "C" __global__ void __launch_bounds__(1024) stale_output(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  __shared__ unsigned long long seen;
  if (threadIdx.x == 0) seen = calls;
  __syncthreads();
  if (seen >= static_cast<unsigned long long>(p.batch)) return;  // after one honest call: nothing
  HonestRow(p, row);
  if (threadIdx.x == 0) atomicAdd(&calls, 1ull);
}
