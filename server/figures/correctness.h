// Correctness of a kernel's output against the fp64 reference.
//
// Rule (SOL-ExecBench's, torch.allclose style): element i matches when
//   |out[i] - ref[i]| <= atol + rtol * |ref[i]|
// and a tensor passes when no element is NaN or Inf and matched / n >= required_matched_ratio.
// The default ratio is 1.0: every element must match (FlashInfer-Bench's default).
// Pure functions; safe to call from any thread.
#pragma once

#include <cstddef>
#include <string_view>

#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

// Per-dtype defaults, about a few units in the last place of the dtype at magnitude 1:
// bf16 atol = rtol = 1e-2, fp16 2e-3, fp32 1e-5; required_matched_ratio 1.0.
v1::Tolerance DefaultTolerance(DType dtype);

// `requested` with every field that is not > 0 replaced by the dtype's default (proto3 cannot
// tell an unset field from 0, so 0 means "default").
v1::Tolerance ResolveTolerance(DType dtype, const v1::Tolerance& requested);

// Compares `n` elements of `actual` (a host tensor of `dtype`) with `expected` (fp64, host)
// under `tol`, used as given (resolve it first). The result is `checked`, carries `tol`, the
// largest absolute error and the largest relative error |out - ref| / max(|ref|, atol) over
// finite elements, the matched ratio (1 for n == 0) and the mismatch count, which includes NaN
// and Inf elements. A NaN or Inf in `actual` always fails, whatever the ratio; so does a
// reference value that is not finite. On failure `detail` names the first failing element as
// "<tensor_name>[i]: got x, expected y" plus how many elements failed.
v1::Correctness CheckAgainstReference(DType dtype, const void* actual, const double* expected,
                                      std::size_t n, const v1::Tolerance& tol,
                                      std::string_view tensor_name = "output");

// Combines the checks of two tensors of the same element count (output and residual_out are
// both [batch, hidden]): passes only when both pass; maxima, flags and mismatch counts are
// combined, matched_ratio is the ratio over both tensors, detail joins the failing details.
// An unchecked side (checked == false) is ignored.
v1::Correctness MergeCorrectness(const v1::Correctness& a, const v1::Correctness& b);

}  // namespace kerneleval::server
