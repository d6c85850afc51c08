// Cheat: counts its calls in module state. The first call it sees is honest (the result
// call of a Run or a benchmark, whose outputs are checked on the host), so are all calls
// from the 300th on; the calls in between return at once. When a submission's module was
// loaded once per device host, that skipped the warm-up and most timed calls of the first
// workload in hot or graph replay (one check after the window, which found an honest call's
// answer), while the verification rounds, which come last, saw an honest kernel.
// Caught by: fresh module state before each phase (the module loaded again before the
// result call of every Measure, a verification round included, and before the timed calls),
// so each verification round's checked call is its second call and returns at once; and by
// every call of hot and graph replay checked in an output slot of its own.
__device__ unsigned long long calls_seen = 0;
__device__ unsigned long long ctas_done = 0;

extern "C" __global__ void __launch_bounds__(1024) call_counter(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  __shared__ unsigned long long call;
  // Every CTA of a call reads the same count: it moves only when the call's last CTA ends.
  if (threadIdx.x == 0) call = *static_cast<volatile unsigned long long*>(&calls_seen);
  __syncthreads();
  if (call == 0 || call >= 300) HonestRow(p, row);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&ctas_done, 1ull) == static_cast<unsigned long long>(p.batch) - 1) {
      ctas_done = 0;
      __threadfence();
      atomicAdd(&calls_seen, 1ull);
    }
  }
}
