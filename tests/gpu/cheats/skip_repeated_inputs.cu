// Cheat: fingerprints the inputs (a few elements) and does no work when they repeat, so the
// timed calls on the same inputs cost almost nothing while every output is right.
// Caught by: in the cold protocol, the calls whose inputs repeat the previous call's (about
// one in four, into poisoned outputs): the skipped call leaves the poison. In hot and graph
// replay on one input set, where repeated inputs are the protocol, the analytic floor (a
// median below declared bytes / peak bandwidth) where the bytes exceed L2, and on machines
// with counters, DRAM traffic below what the definition must move.
__device__ float last_fingerprint = -1.f;

extern "C" __global__ void __launch_bounds__(1024) skip_repeated_inputs(const kerneleval_params p) {
  const long long row = blockIdx.x;
  if (row >= p.batch) return;
  const float fingerprint = Load(p.hidden_states, 0, p.dtype) + Load(p.residual, 0, p.dtype) +
                            Load(p.hidden_states, (p.batch - 1) * p.hidden_states_stride, p.dtype);
  if (fingerprint == last_fingerprint) return;
  HonestRow(p, row);
  __syncthreads();
  if (row == p.batch - 1 && threadIdx.x == 0) last_fingerprint = fingerprint;
}
