#include "server/figures/correctness.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval::server {

v1::Tolerance DefaultTolerance(DType dtype) {
  v1::Tolerance tol;
  switch (dtype) {
    case DType::kBF16:
      // bf16 has 8 significant bits: one ulp at 1.0 is 7.8e-3. SOL-ExecBench and
      // FlashInfer-Bench both use 1e-2.
      tol.set_atol(1e-2);
      tol.set_rtol(1e-2);
      break;
    case DType::kFP16:
      // fp16 has 11 bits: one ulp at 1.0 is 9.8e-4; two ulps of slack.
      tol.set_atol(2e-3);
      tol.set_rtol(2e-3);
      break;
    case DType::kFP32:
      // fp32 outputs carry the fp32 reduction's error over up to 32k-element rows, far above
      // one fp32 ulp (1.2e-7) but well below 1e-5 (kernels/ tests measure it).
      tol.set_atol(1e-5);
      tol.set_rtol(1e-5);
      break;
  }
  tol.set_required_matched_ratio(1.0);
  return tol;
}

v1::Tolerance ResolveTolerance(DType dtype, const v1::Tolerance& requested) {
  v1::Tolerance tol = DefaultTolerance(dtype);
  if (requested.atol() > 0) tol.set_atol(requested.atol());
  if (requested.rtol() > 0) tol.set_rtol(requested.rtol());
  if (requested.required_matched_ratio() > 0) {
    tol.set_required_matched_ratio(requested.required_matched_ratio());
  }
  return tol;
}

v1::Correctness CheckAgainstReference(DType dtype, const void* actual, const double* expected,
                                      std::size_t n, const v1::Tolerance& tol,
                                      std::string_view tensor_name) {
  v1::Correctness result;
  result.set_checked(true);
  *result.mutable_tolerance() = tol;
  const double atol = tol.atol();
  const double rtol = tol.rtol();
  double max_abs = 0;
  double max_rel = 0;
  std::uint64_t mismatched = 0;
  bool has_nan = false;
  bool has_inf = false;
  bool reference_bad = false;
  std::size_t first_bad = n;
  for (std::size_t i = 0; i < n; ++i) {
    const double got = LoadAsFloat(dtype, actual, i);
    const double ref = expected[i];
    bool ok;
    if (std::isnan(got)) {
      has_nan = true;
      ok = false;
    } else if (std::isinf(got)) {
      has_inf = true;
      ok = false;
    } else if (!std::isfinite(ref)) {
      reference_bad = true;
      ok = false;
    } else {
      const double diff = std::fabs(got - ref);
      const double denom = std::max(std::fabs(ref), atol);
      max_abs = std::max(max_abs, diff);
      max_rel = std::max(max_rel, denom > 0 ? diff / denom : (diff > 0 ? INFINITY : 0.0));
      ok = diff <= atol + rtol * std::fabs(ref);
    }
    if (!ok) {
      ++mismatched;
      if (first_bad == n) first_bad = i;
    }
  }
  const double matched_ratio =
      n == 0 ? 1.0 : static_cast<double>(n - mismatched) / static_cast<double>(n);
  result.set_max_abs_error(max_abs);
  result.set_max_rel_error(max_rel);
  result.set_matched_ratio(matched_ratio);
  result.set_mismatched(mismatched);
  result.set_has_nan(has_nan);
  result.set_has_inf(has_inf);
  // Non-finite values fail outright: a NaN that a loose ratio lets through is still a bug.
  result.set_passed(!has_nan && !has_inf && !reference_bad &&
                    matched_ratio >= tol.required_matched_ratio());
  if (first_bad != n) {
    const double got = LoadAsFloat(dtype, actual, first_bad);
    const double ref = expected[first_bad];
    std::string detail = absl::StrCat(absl::string_view(tensor_name.data(), tensor_name.size()),
                                      "[", first_bad, "]: got ", got, ", expected ", ref);
    if (!std::isfinite(ref)) absl::StrAppend(&detail, " (the reference is not finite)");
    absl::StrAppend(&detail, "; ", mismatched, " of ", n, " elements fail |out - ref| <= ", atol,
                    " + ", rtol, " * |ref|");
    result.set_detail(std::move(detail));
  }
  return result;
}

v1::Correctness MergeCorrectness(const v1::Correctness& a, const v1::Correctness& b) {
  if (!b.checked()) return a;
  if (!a.checked()) return b;
  v1::Correctness merged = a;
  merged.set_passed(a.passed() && b.passed());
  merged.set_max_abs_error(std::max(a.max_abs_error(), b.max_abs_error()));
  merged.set_max_rel_error(std::max(a.max_rel_error(), b.max_rel_error()));
  // Equal element counts make the mean of the two ratios the ratio over both tensors.
  merged.set_matched_ratio((a.matched_ratio() + b.matched_ratio()) / 2);
  merged.set_mismatched(a.mismatched() + b.mismatched());
  merged.set_has_nan(a.has_nan() || b.has_nan());
  merged.set_has_inf(a.has_inf() || b.has_inf());
  if (a.detail().empty()) {
    merged.set_detail(b.detail());
  } else if (!b.detail().empty()) {
    merged.set_detail(absl::StrCat(a.detail(), "; ", b.detail()));
  }
  return merged;
}

}  // namespace kerneleval::server
