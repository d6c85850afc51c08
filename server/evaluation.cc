#include "server/evaluation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kerneleval/kernels/half_types.h"
#include "server/correctness.h"

namespace kerneleval::server {
namespace {

// Scans one [batch, hidden] (or [hidden]) input for NaN and Inf; names the first one.
void ScanInput(const Problem& problem, const void* data, std::size_t n, const char* name,
               Reference* ref) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = LoadAsFloat(problem.dtype, data, i);
    if (std::isfinite(v)) continue;
    const bool nan = std::isnan(v);
    ref->input_has_nan = ref->input_has_nan || nan;
    ref->input_has_inf = ref->input_has_inf || !nan;
    if (ref->nonfinite_input.empty()) {
      const auto hidden = static_cast<std::size_t>(problem.hidden);
      ref->nonfinite_input =
          n == hidden && std::string(name) == "weight"
              ? absl::StrCat(name, "[", i, "] is ", nan ? "nan" : "inf")
              : absl::StrCat(name, "[", i / hidden, ", ", i % hidden, "] (row ", i / hidden,
                             ") is ", nan ? "nan" : "inf");
    }
  }
}

}  // namespace

Reference ComputeReference(const Problem& problem, const HostInputs& inputs) {
  Reference ref;
  const std::size_t n = problem.TensorElements();
  const bool writes_residual = WritesResidual(problem.mode);
  ref.output.resize(n);
  ref.residual_out.resize(writes_residual ? n : 0);
  FusedAddRmsNormReference(problem.dtype, problem.batch, problem.hidden, problem.eps,
                           inputs.hidden_states, inputs.residual, inputs.weight, ref.output.data(),
                           writes_residual ? ref.residual_out.data() : nullptr);
  ScanInput(problem, inputs.hidden_states, n, "hidden_states", &ref);
  ScanInput(problem, inputs.residual, n, "residual", &ref);
  ScanInput(problem, inputs.weight, static_cast<std::size_t>(problem.hidden), "weight", &ref);
  return ref;
}

v1::Correctness CheckOutputs(const Problem& problem, const HostOutputs& outputs,
                             const Reference& reference, const v1::Tolerance& tolerance) {
  const std::size_t n = problem.TensorElements();
  v1::Correctness c = CheckAgainstReference(problem.dtype, outputs.output, reference.output.data(),
                                            n, tolerance, "output");
  if (WritesResidual(problem.mode)) {
    c = MergeCorrectness(c, CheckAgainstReference(problem.dtype, outputs.residual_out,
                                                  reference.residual_out.data(), n, tolerance,
                                                  "residual_out"));
  }
  if (!reference.nonfinite_input.empty()) {
    // A non-finite input makes non-finite outputs; the caller is told where it came from.
    c.set_has_nan(c.has_nan() || reference.input_has_nan);
    c.set_has_inf(c.has_inf() || reference.input_has_inf);
    c.set_passed(false);
    c.set_detail(c.detail().empty()
                     ? absl::StrCat("input ", reference.nonfinite_input)
                     : absl::StrCat(c.detail(), "; input ", reference.nonfinite_input));
  }
  return c;
}

absl::StatusOr<Evaluation> Evaluate(Backend& backend, const EvaluationSpec& spec) {
  absl::StatusOr<Measurement> m =
      backend.Measure(spec.problem, spec.inputs, spec.outputs, spec.implementation, spec.options);
  if (!m.ok()) return m.status();
  Evaluation e;
  e.measurement = *std::move(m);
  e.stats = ComputeStats(e.measurement.samples_seconds);
  const Problem& p = spec.problem;
  e.bytes_moved = BytesMoved(p.dtype, p.mode, p.batch, p.hidden);
  if (e.stats.median > 0) e.bytes_per_second = static_cast<double>(e.bytes_moved) / e.stats.median;
  e.sol = SolFigures(e.bytes_moved, e.stats.median, spec.peaks);
  if (spec.reference != nullptr) {
    e.correctness = CheckOutputs(p, spec.outputs, *spec.reference, spec.tolerance);
  }
  return e;
}

}  // namespace kerneleval::server
