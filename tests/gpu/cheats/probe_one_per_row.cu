// Cheat: reads one element of each output row (its first) and skips the row when that
// element is a finite number: output_inspect at the cost of one load per row.
// Caught by: the seeded numbers every checked call's output is poisoned with (in hot and
// graph replay in an output slot of its own per call): the skipped rows keep them.
extern "C" __global__ void __launch_bounds__(1024) probe_one_per_row(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  if (isfinite(Load(p.output, row * p.output_stride, p.dtype))) return;
  HonestRow(p, row);
}
