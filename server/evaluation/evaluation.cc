#include "server/evaluation/evaluation.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/input_generator.h"
#include "common/parallel_ranges.h"
#include "kerneleval/kernels/half_types.h"
#include "server/device/call_checks.h"
#include "server/figures/correctness.h"

namespace kerneleval::server {
namespace {

// Scans elements [begin, end) of one [batch, hidden] (or [hidden]) input of `n` elements for
// NaN and Inf; names the first one.
void ScanInput(const Problem& problem, const void* data, std::size_t n, std::size_t begin,
               std::size_t end, const char* name, Reference* ref) {
  for (std::size_t i = begin; i < end; ++i) {
    const float v = LoadAsFloat(problem.dtype, data, i);
    if (std::isfinite(v)) continue;
    const bool nan = std::isnan(v);
    ref->input_has_nan = ref->input_has_nan || nan;
    ref->input_has_inf = ref->input_has_inf || !nan;
    if (ref->nonfinite_input.empty()) {
      const auto hidden = static_cast<std::size_t>(problem.hidden);
      ref->nonfinite_input = n == hidden && std::string(name) == "weight"
                                 ? absl::StrCat(name, "[", i, "] is ", nan ? "nan" : "inf")
                                 : absl::StrCat(name, "[", i / hidden, ", ", i % hidden, "] (row ",
                                                i / hidden, ") is ", nan ? "nan" : "inf");
    }
  }
}

// One call of `spec.implementation` on fresh inputs, checked; empty when it passed.
absl::StatusOr<std::string> VerifyOnFreshInputs(Backend& backend, const EvaluationSpec& spec,
                                                int round) {
  const Problem& p = spec.problem;
  const std::uint64_t seed = SecretSeed();
  // Host work of the round on every core: at 33 M elements each tensor and the reference
  // take about a second on one.
  const std::size_t threads = HostWorkThreads();
  const std::vector<std::uint8_t> x =
      ParallelRandomTensor(p.dtype, p.TensorElements(), seed ^ 1, threads);
  const std::vector<std::uint8_t> r =
      ParallelRandomTensor(p.dtype, p.TensorElements(), seed ^ 2, threads);
  const std::vector<std::uint8_t> w =
      RandomTensor(p.dtype, static_cast<std::size_t>(p.hidden), seed ^ 3);
  const HostInputs inputs{x.data(), r.data(), w.data()};
  // 0xff is NaN in every dtype: an element the call does not write fails the check.
  std::vector<unsigned char> out(p.TensorBytes(), 0xff);
  std::vector<unsigned char> res(WritesResidual(p.mode) ? p.TensorBytes() : 0, 0xff);
  MeasureOptions once = spec.options;
  once.check_calls = true;
  once.check_tolerance = spec.tolerance;
  once.warmup = 0;
  once.repetitions = 1;
  once.adaptive.enabled = false;
  once.graph = false;
  once.measure_dram_bytes = false;
  once.profile = false;
  absl::StatusOr<Measurement> m =
      backend.Measure(p, inputs, {out.data(), res.data()}, spec.implementation, once);
  if (!m.ok()) return m.status();
  // The round's own checked call (a fresh module's second call) counts as much as its
  // result call.
  if (!m->call_check_failure.empty()) {
    return absl::StrCat("verification round ", round + 1, ": ", m->call_check_failure);
  }
  const Reference reference = ComputeReference(p, inputs, threads);
  const v1::Correctness c = CheckOutputs(p, {out.data(), res.data()}, reference, spec.tolerance);
  if (c.passed()) return std::string();
  return absl::StrCat("verification round ", round + 1, " on fresh inputs failed: ", c.detail());
}

}  // namespace

Reference ComputeReference(const Problem& problem, const HostInputs& inputs, std::size_t threads) {
  Reference ref;
  const std::size_t n = problem.TensorElements();
  const auto hidden = static_cast<std::size_t>(problem.hidden);
  const std::size_t element = ElementSize(problem.dtype);
  const bool writes_residual = WritesResidual(problem.mode);
  ref.output.resize(n);
  ref.residual_out.resize(writes_residual ? n : 0);
  // Whole rows per thread; each range's scan findings kept apart, then the first one (in
  // element order) reported, as a single scan would.
  std::mutex scans_mu;
  std::vector<std::pair<std::size_t, Reference>> found;
  ParallelRanges(n, threads, hidden, [&](std::size_t begin, std::size_t end) {
    const std::size_t row = begin / hidden, rows = (end - begin) / hidden;
    auto at = [&](const void* base) { return static_cast<const char*>(base) + begin * element; };
    FusedAddRmsNormReference(problem.dtype, static_cast<std::int64_t>(rows), problem.hidden,
                             problem.eps, at(inputs.hidden_states), at(inputs.residual),
                             inputs.weight, ref.output.data() + begin,
                             writes_residual ? ref.residual_out.data() + begin : nullptr);
    Reference scan;
    ScanInput(problem, inputs.hidden_states, n, begin, end, "hidden_states", &scan);
    Reference residual_scan;
    ScanInput(problem, inputs.residual, n, begin, end, "residual", &residual_scan);
    std::lock_guard<std::mutex> lock(scans_mu);
    found.emplace_back(row, std::move(scan));
    found.emplace_back(row + n, std::move(residual_scan));  // after every hidden_states row
  });
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, scan] : found) {
    ref.input_has_nan = ref.input_has_nan || scan.input_has_nan;
    ref.input_has_inf = ref.input_has_inf || scan.input_has_inf;
    if (ref.nonfinite_input.empty()) ref.nonfinite_input = scan.nonfinite_input;
  }
  ScanInput(problem, inputs.weight, hidden, 0, hidden, "weight", &ref);
  return ref;
}

v1::Correctness CheckOutputs(const Problem& problem, const HostOutputs& outputs,
                             const Reference& reference, const v1::Tolerance& tolerance) {
  const std::size_t n = problem.TensorElements();
  v1::Correctness c = CheckAgainstReference(problem.dtype, outputs.output, reference.output.data(),
                                            n, tolerance, "output");
  if (WritesResidual(problem.mode)) {
    c = MergeCorrectness(
        c, CheckAgainstReference(problem.dtype, outputs.residual_out, reference.residual_out.data(),
                                 n, tolerance, "residual_out"));
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
  MeasureOptions options = spec.options;
  if (spec.verification_rounds > 0) {
    // A submitted kernel: every warm-up and timed call is checked too (call_checks.h).
    options.check_calls = true;
  }
  // Also where the protocol asked for it (Protocol.check_every_call), built-ins included.
  if (options.check_calls) options.check_tolerance = spec.tolerance;
  absl::StatusOr<Measurement> m =
      backend.Measure(spec.problem, spec.inputs, spec.outputs, spec.implementation, options);
  if (!m.ok()) return m.status();
  Evaluation e;
  e.measurement = *std::move(m);
  if (!e.measurement.call_check_failure.empty()) {
    e.verification_failure = e.measurement.call_check_failure;
  }
  e.stats = ComputeStats(e.measurement.samples_seconds);
  const Problem& p = spec.problem;
  e.bytes_moved = BytesMoved(p.dtype, p.mode, p.batch, p.hidden);
  if (e.stats.median > 0) e.bytes_per_second = static_cast<double>(e.bytes_moved) / e.stats.median;
  e.sol = SolFigures(e.bytes_moved, e.stats.median, spec.peaks);
  if (spec.reference != nullptr) {
    e.correctness = CheckOutputs(p, spec.outputs, *spec.reference, spec.tolerance);
  }
  for (int round = 0; round < spec.verification_rounds && e.verification_failure.empty(); ++round) {
    absl::StatusOr<std::string> failure = VerifyOnFreshInputs(backend, spec, round);
    if (!failure.ok()) return failure.status();
    e.verification_failure = *std::move(failure);
  }
  return e;
}

Verdict Judge(const Evaluation& e, const IntegrityFindings& findings, bool submitted) {
  Verdict v;
  if (!e.verification_failure.empty()) {
    v.status = v1::RESULT_STATUS_REJECTED;
    v.error = e.verification_failure;
  } else if (findings.rejects()) {
    v.status = v1::RESULT_STATUS_REJECTED;
    v.error = absl::StrCat("integrity: ", absl::StrJoin(findings.too_good, "; "));
  } else if (e.correctness.checked()) {
    v.status = e.correctness.passed() ? v1::RESULT_STATUS_PASSED : v1::RESULT_STATUS_INCORRECT;
  }
  v.withhold_outputs = submitted && v.status != v1::RESULT_STATUS_PASSED;
  return v;
}

}  // namespace kerneleval::server
