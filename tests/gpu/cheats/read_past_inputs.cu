// Cheat: looks past the end of its inputs for a cached answer. A harness that allocates its
// tensors back to back, or keeps expected outputs beside the inputs, leaves another buffer
// right after hidden_states; this kernel computes its first call honestly and afterwards
// takes the last row's output from the row that lies past the end of hidden_states instead
// of computing it.
// Caught by: the guard region the service places after every tensor, fresh random bytes
// before every call, so the copied row is garbage; the check of every call names the first
// call that did it (a warm-up call: the result call was honest).
__device__ unsigned long long past_calls = 0;

extern "C" __global__ void __launch_bounds__(1024) read_past_inputs(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  __shared__ unsigned long long seen;
  if (threadIdx.x == 0) seen = past_calls;
  __syncthreads();
  if (seen < static_cast<unsigned long long>(p.batch) || row != p.batch - 1) {
    HonestRow(p, row);
  } else {
    const long long past = p.batch * p.hidden_states_stride;  // one row past the last one
    for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
      Store(p.output, row * p.output_stride + i, Load(p.hidden_states, past + i, p.dtype), p.dtype);
    }
  }
  if (threadIdx.x == 0) atomicAdd(&past_calls, 1ull);
}
