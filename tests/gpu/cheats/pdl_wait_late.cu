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
  const float sum_sq = RowSumOfSquares(p, row);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  WriteRow(p, row, RowInvRms(p, sum_sq));
}
