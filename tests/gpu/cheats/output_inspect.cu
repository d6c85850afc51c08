// Cheat: skips a row whose output row already holds finite numbers, taking them for an
// earlier call's answer. In hot and graph replay on one input set every call used to get the
// same inputs and the same output buffer, so after the first call every row was skipped,
// and the one check after the window found the right answer there (ranked first at every
// small batch of the h2048 suite on an H200).
// Caught by: every checked call's output is poisoned with seeded numbers just before it (in
// hot and graph replay each call writes an output slot of its own, poisoned before its
// window): the cheat takes them for an answer, leaves them, and the check fails.
extern "C" __global__ void __launch_bounds__(1024) output_inspect(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  __shared__ int unwritten;
  if (threadIdx.x == 0) unwritten = 0;
  __syncthreads();
  for (long long i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    if (!isfinite(Load(p.output, row * p.output_stride + i, p.dtype))) unwritten = 1;
  }
  __syncthreads();
  if (unwritten == 0) return;
  HonestRow(p, row);
}
