// One evaluation: an implementation run on one input set under a protocol, its samples
// summarized, converted to bandwidth and SOL, and its outputs checked against the fp64
// reference. Run, Benchmark and every later front (submissions, the Open Inference Protocol)
// call Evaluate; nothing else composes these steps.
//
// Runs on the device's worker thread (it drives the backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"
#include "server/evaluation/measurement_checks.h"
#include "server/figures/sol.h"
#include "server/figures/statistics.h"

namespace kerneleval::server {

// The fp64 reference of one input set, computed once and shared by every implementation
// evaluated on those inputs.
struct Reference {
  std::vector<double> output;
  std::vector<double> residual_out;  // empty for Mode::kOutput
  // The first non-finite input element, e.g. "residual[3, 17] (row 3) is inf"; empty when
  // every input is finite.
  std::string nonfinite_input;
  bool input_has_nan = false;
  bool input_has_inf = false;
};
// Rows are split over `threads` host threads (the same result for any count).
Reference ComputeReference(const Problem& problem, const HostInputs& inputs,
                           std::size_t threads = 1);

// `outputs` against `reference`: output and residual_out checked under their own names, and
// a non-finite input reported (has_nan / has_inf set, the input row named in `detail`).
v1::Correctness CheckOutputs(const Problem& problem, const HostOutputs& outputs,
                             const Reference& reference, const v1::Tolerance& tolerance);

// Verification rounds a submitted kernel gets after its timed calls, on top of the checks of
// every warm-up and timed call (MeasureOptions::check_calls, server/device/call_checks.h):
// these run the kernel on inputs of the caller's distribution, in new buffers, whatever protocol.
inline constexpr int kSubmissionVerificationRounds = 3;

struct EvaluationSpec {
  Problem problem;
  HostInputs inputs;
  HostOutputs outputs;  // where the first call's results land; the caller poisons them
  std::string implementation;
  MeasureOptions options;
  std::vector<PeakBandwidth> peaks;
  const Reference* reference = nullptr;  // null: outputs are not checked
  v1::Tolerance tolerance;               // resolved; used with `reference`
  // Calls after the measurement, each on fresh inputs from a seed the caller cannot know,
  // into poisoned outputs, checked against the fp64 reference: an implementation that
  // caches outputs by address or content, skips rows, replays stale results or works on a
  // side stream fails one. Submitted kernels get them; the built-ins need none. Non-zero
  // also turns on the checks of every call of the measurement (MeasureOptions::check_calls
  // under `tolerance`).
  int verification_rounds = 0;
};

// What Run's response and Benchmark's results share.
struct Evaluation {
  Measurement measurement;
  SampleStats stats;
  std::uint64_t bytes_moved = 0;
  double bytes_per_second = 0;
  std::vector<v1::SolFigure> sol;
  v1::Correctness correctness;  // checked == false without a reference
  // Empty, or which checked call or verification round failed and how (the result is then
  // REJECTED).
  std::string verification_failure;
};

// A backend failure (a CUDA fault, an unknown implementation) is the error; a wrong result
// is an Evaluation whose correctness did not pass.
absl::StatusOr<Evaluation> Evaluate(Backend& backend, const EvaluationSpec& spec);

// The verdict on one evaluation, the same for a Benchmark result and a Run response.
struct Verdict {
  v1::ResultStatus status = v1::RESULT_STATUS_UNSPECIFIED;
  std::string error;  // why REJECTED; empty otherwise
  // Submitted code that did not pass may have written anything it could reach (another
  // caller's data included): the caller gets the finding, not the tensors.
  bool withhold_outputs = false;
};
// REJECTED when an anti-cheat check caught it: a wrong output on fresh inputs or in a checked
// call (e.verification_failure), or a time or traffic its declared bytes do not allow
// (findings.too_good, from AnnotateMeasurement; notes such as throttling never reject).
// Otherwise PASSED or INCORRECT from e.correctness, or UNSPECIFIED where the outputs were
// not checked. `submitted`: the implementation is a caller's submission.
Verdict Judge(const Evaluation& e, const IntegrityFindings& findings, bool submitted);

// Copies the shared fields into a v1::RunResponse or a v1::WorkloadResult.
template <typename Result>
void WriteEvaluation(const Evaluation& e, Result* out) {
  out->set_timer(e.measurement.timer);
  ToProto(e.stats, out->mutable_latency());
  out->set_bytes_moved(e.bytes_moved);
  out->set_bytes_per_second(e.bytes_per_second);
  out->clear_sol();
  for (const v1::SolFigure& f : e.sol) *out->add_sol() = f;
  if (e.correctness.checked()) *out->mutable_correctness() = e.correctness;
}

}  // namespace kerneleval::server
