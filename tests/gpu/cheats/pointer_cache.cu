// Cheat: remembers the output pointer of the last call and skips the work when it is asked
// again for the same buffers (an output cache keyed on addresses).
// Caught by: the check of every call: the first warm-up call gets fresh inputs in the same
// buffers and poisoned outputs, and the skipped call leaves the poison (in hot and graph
// replay, the check of the input set after the window).
__device__ const void* last_inputs = nullptr;

extern "C" __global__ void __launch_bounds__(1024) pointer_cache(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  if (last_inputs == p.hidden_states) return;
  HonestRow(p, row);
  __syncthreads();
  if (row == p.batch - 1 && threadIdx.x == 0) last_inputs = p.hidden_states;
}
