// Cheat: registered with --pdl, it lets the next launch start at its entry
// (griddepcontrol.launch_dependents) and never executes griddepcontrol.wait, so the calls of
// a graph replay run side by side instead of one after the other (ranked first at B = 1..79
// of the h2048 suite in graph replay on an H200, 0.56-0.66 us per call against cuda_fused's
// 1.09-1.26).
// Caught by: registration. The compile reports whether each kernel can execute
// griddepcontrol.wait (KernelResources.waits_for_grid_dependency), and a plan that launches
// one that cannot with pdl is INVALID_ARGUMENT naming launch_plan.kernels[i].pdl; a device
// host refuses to load such a record too. Before that rule, only the chained calls of hot
// and graph replay stood against it: each call's hidden_states is the previous call's
// output slot, poisoned before the window, and each call is checked after it against the
// fp64 reference of what that slot finally held. A call that reads its input before its
// predecessor has written it computes from the poison (or a half-written row) and fails;
// they still catch pdl_wait_late.cu, which waits too late.
extern "C" __global__ void __launch_bounds__(1024) pdl_no_wait(const kerneleval_params p) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  HonestRow(p, row);
}
