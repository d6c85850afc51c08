#include "server/cuda/cuda_workspace.h"

namespace kerneleval::server {

FusedAddRmsNormArgs CudaWorkspace::Args(const CudaBufferSet& s) const {
  FusedAddRmsNormArgs a;
  a.dtype = problem->dtype;
  a.mode = problem->mode;
  a.batch = problem->batch;
  a.hidden = problem->hidden;
  a.eps = problem->eps;
  a.hidden_states = s.x.get();
  a.residual = s.r.get();
  a.weight = weight->get();
  a.output = in_place ? s.x.get() : s.out.get();
  a.residual_out = !writes_residual ? nullptr : in_place ? s.r.get() : s.res.get();
  return a;
}

FusedAddRmsNormArgs CudaWorkspace::CallArgs(std::size_t position) const {
  if (!Chained()) return Args(*sets[position]);
  FusedAddRmsNormArgs a = Args(*sets[position % sets.size()]);
  a.weight = checks.chain_weight.get();
  if (in_place) {
    // Its own hidden_states, and the residual as the previous call left it (one buffer,
    // slot 0's second tensor): each call depends on its predecessor.
    a.hidden_states = a.output = Slot(position, 0);
    a.residual = a.residual_out = Slot(0, 1);
    return a;
  }
  if (position > 0) a.hidden_states = Slot(position - 1, 0);
  a.output = Slot(position, 0);
  if (writes_residual) a.residual_out = Slot(position, 1);
  return a;
}

absl::Status CudaWorkspace::Launch(std::size_t position) const {
  KE_CUDA_RETURN_IF_ERROR(impl->launch(CallArgs(position), Scratch(position), stream));
  return absl::OkStatus();
}

}  // namespace kerneleval::server
