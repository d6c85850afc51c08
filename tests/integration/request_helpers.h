// Helpers shared by the tests that call a real server: the expected answer of a Run from the
// fp64 reference, and a small custom suite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/conversions.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/figures/correctness.h"

namespace kerneleval::testing {

// "" when `response` carries the answer to `request` as the fp64 reference
// (FusedAddRmsNormReference) computes it: an output, and for the modes that write one a
// residual_out, of the request's dtype and shape, every element within the dtype's default
// tolerance (server::DefaultTolerance). Otherwise what differs, naming the first failing
// element. The oracle is not the server's code: the CPU kernels and the SIMD dispatch are
// what these tests check.
inline std::string CompareWithReference(const v1::RunRequest& request,
                                        const v1::RunResponse& response) {
  const v1::Tensor& hs = request.hidden_states();
  const absl::StatusOr<DType> dtype = DTypeFromProto(hs.dtype(), "hidden_states.dtype");
  const absl::StatusOr<Mode> mode = ModeFromProto(request.mode(), "mode");
  if (!dtype.ok() || !mode.ok() || hs.shape_size() != 2) return "the request is not valid";
  const std::int64_t batch = hs.shape(0);
  const std::int64_t hidden = hs.shape(1);
  const std::size_t n = static_cast<std::size_t>(batch * hidden);
  std::vector<double> out(n), res(n);
  const double eps = request.has_eps() ? request.eps() : 1e-6;
  FusedAddRmsNormReference(*dtype, batch, hidden, eps, hs.data().data(),
                           request.residual().data().data(), request.weight().data().data(),
                           out.data(), res.data());
  const v1::Tolerance tolerance = server::DefaultTolerance(*dtype);
  auto compare = [&](const char* name, const v1::Tensor& t, const std::vector<double>& ref) {
    const std::string what = name;
    if (t.dtype() != hs.dtype()) return what + ": dtype " + v1::DType_Name(t.dtype());
    if (t.shape_size() != 2 || t.shape(0) != batch || t.shape(1) != hidden) {
      return what + ": shape is not [" + std::to_string(batch) + ", " + std::to_string(hidden) +
             "]";
    }
    if (t.data().size() != n * ElementSize(*dtype)) {
      return what + ": " + std::to_string(t.data().size()) + " bytes";
    }
    const v1::Correctness c =
        server::CheckAgainstReference(*dtype, t.data().data(), ref.data(), n, tolerance, name);
    return c.passed() ? std::string() : c.detail();
  };
  std::string diff = compare("output", response.output(), out);
  if (WritesResidual(*mode)) {
    const std::string residual = compare("residual_out", response.residual_out(), res);
    if (!residual.empty()) diff += (diff.empty() ? "" : "; ") + residual;
  } else if (response.has_residual_out()) {
    diff += (diff.empty() ? "" : "; ") + std::string("residual_out in MODE_OUTPUT");
  }
  return diff;
}

// The operation on the request's bytes with FusedAddRmsNormCpu, bit for bit. Not an oracle
// of the operation (it is the server's own CPU code): only for tests whose subject is that
// bytes cross a boundary unchanged, such as a device host's shared memory. `res` is empty for
// MODE_OUTPUT.
inline void ComputeLocally(const v1::RunRequest& r, std::string* out, std::string* res) {
  const DType dtype = *DTypeFromProto(r.hidden_states().dtype(), "dtype");
  const Mode mode = *ModeFromProto(r.mode(), "mode");
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
