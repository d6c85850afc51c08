// Helpers shared by the tests that call a real server: the expected answer of a Run computed
// locally, and a small custom suite.
#pragma once

#include <string>
#include <vector>

#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/request_validation.h"

namespace kerneleval::testing {

// The operation on the request's bytes with FusedAddRmsNormCpu: the server's CPU path is the
// same code, so its answer must match bit for bit. `res` is empty for MODE_OUTPUT.
inline void ComputeLocally(const v1::RunRequest& r, std::string* out, std::string* res) {
  const DType dtype = *server::DTypeFromProto(r.hidden_states().dtype(), "dtype");
  const Mode mode = *server::ModeFromProto(r.mode(), "mode");
  FusedAddRmsNormArgs a;
  a.dtype = dtype;
  a.mode = mode == Mode::kInPlace ? Mode::kOutputAndResidual : mode;
  a.batch = r.hidden_states().shape(0);
  a.hidden = r.hidden_states().shape(1);
  a.eps = r.has_eps() ? static_cast<float>(r.eps()) : 1e-6f;
  a.hidden_states = r.hidden_states().data().data();
  a.residual = r.residual().data().data();
  a.weight = r.weight().data().data();
  out->assign(r.hidden_states().data().size(), '\0');
  res->assign(WritesResidual(mode) ? r.residual().data().size() : 0, '\0');
  a.output = out->data();
  a.residual_out = WritesResidual(mode) ? res->data() : nullptr;
  FusedAddRmsNormCpu(a);
}

// A custom suite: var batch_size, const hidden_size, one workload per batch.
inline v1::SuiteDefinition SmallSuite(v1::DType dtype, const std::vector<int>& batches,
                                      int hidden) {
  v1::SuiteDefinition s;
  s.set_name("small");
  s.set_dtype(dtype);
  s.set_mode(v1::MODE_OUTPUT);
  s.set_eps(1e-6);
  s.add_axes()->set_name("batch_size");
  v1::Axis* h = s.add_axes();
  h->set_name("hidden_size");
  h->set_is_const(true);
  h->set_value(hidden);
  for (int b : batches) (*s.add_workloads()->mutable_axes())["batch_size"] = b;
  return s;
}

}  // namespace kerneleval::testing
