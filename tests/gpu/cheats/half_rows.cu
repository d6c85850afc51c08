// Cheat: computes only the first half of the rows, rounded down (half the bytes, half the
// time; at batch 1, nothing).
// Caught by: the output check of the result call and of every checked call (the other rows
// stay poisoned).
extern "C" __global__ void __launch_bounds__(1024) half_rows(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch / 2) return;
  HonestRow(p, row);
}
