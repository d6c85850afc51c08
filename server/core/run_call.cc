#include "server/core/run_call.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel_ranges.h"
#include "server/evaluation/evaluation.h"
#include "server/evaluation/measurement_checks.h"
#include "server/figures/correctness.h"
#include "server/figures/sol.h"

namespace kerneleval::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Output tensors in the response, sized and shaped like the inputs; the backend writes the
// first call's results straight into them.
HostOutputs PrepareOutputs(const v1::RunRequest& request, const Problem& problem,
                           v1::RunResponse* response) {
  v1::Tensor* out = response->mutable_output();
  out->set_dtype(request.hidden_states().dtype());
  *out->mutable_shape() = request.hidden_states().shape();
  out->mutable_data()->resize(problem.TensorBytes());
  HostOutputs outputs{out->mutable_data()->data(), nullptr};
  if (WritesResidual(problem.mode)) {
    v1::Tensor* res = response->mutable_residual_out();
    res->set_dtype(request.residual().dtype());
    *res->mutable_shape() = request.residual().shape();
    res->mutable_data()->resize(problem.TensorBytes());
    outputs.residual_out = res->mutable_data()->data();
  }
  return outputs;
}

// The status, how it was measured and the integrity flags, judged as Benchmark judges a
// result (AnnotateMeasurement and Judge), so that every front reports the same verdict.
// Returns the verdict, whose withhold_outputs the caller applies.
Verdict WriteVerdict(const Evaluation& e, const Problem& problem, const v1::Device& device,
                     const MeasureOptions& options, bool submitted, v1::RunResponse* response) {
  v1::WorkloadResult annotated;
  v1::Environment unused_environment;
  const IntegrityFindings findings = AnnotateMeasurement(
      e.measurement, problem, device, options, e.stats.median, &annotated, &unused_environment);
  const Verdict verdict = Judge(e, findings, submitted);
  response->set_status(verdict.status);
  response->set_error(verdict.error);
  response->set_measured_as(annotated.measured_as());
  *response->mutable_integrity_flags() = annotated.integrity_flags();
  response->set_calls_checked(e.measurement.calls_checked);
  if (annotated.has_profile()) *response->mutable_profile() = annotated.profile();
  if (verdict.withhold_outputs) {
    response->mutable_correctness()->set_detail(absl::StrCat(
        response->correctness().detail(), "; outputs withheld: the submission did not pass"));
  }
  return verdict;
}

// On the device's worker thread.
absl::Status EvaluateRun(ServiceState& state, Backend& backend, const Caller& caller,
                         double queue_seconds, double handoff_seconds,
                         const v1::RunRequest& request, const Problem& problem,
                         const ResolvedImplementation& resolved, Clock::time_point t0,
                         Clock::time_point queued, v1::RunResponse* response) {
  const auto dequeued = Clock::now();
  state.metrics->ObserveQueueWait(backend.name(), queue_seconds);
  if (absl::Status s = StillWanted(caller, InQueueOf(backend, queue_seconds)); !s.ok()) return s;
  if (resolved.submission) {
    if (absl::Status s = backend.AddSubmission(*resolved.submission); !s.ok()) return s;
  }
  const std::string& impl = resolved.name;
  const auto started = Clock::now();
  EvaluationSpec spec;
  spec.problem = problem;
  spec.inputs = {request.hidden_states().data().data(), request.residual().data().data(),
                 request.weight().data().data()};
  spec.outputs = PrepareOutputs(request, problem, response);
  spec.implementation = impl;
  // Described once per call: Describe() builds the whole message (and the CPU backend reads
  // the memory size from the kernel), and IsGpu() would describe the device again.
  const v1::Device device = backend.Describe();
  spec.options = ToMeasureOptions(RunProtocol(request, device.kind() == "cuda"));
  spec.options.should_stop = [&caller] { return caller.Cancelled(); };
  if (resolved.submission) spec.options.tenant = resolved.submission->tenant;
  spec.peaks = PeaksFor(device, /*with_measured_copy=*/false);
  spec.tolerance = ResolveTolerance(problem.dtype, v1::Tolerance());
  spec.verification_rounds = resolved.submission ? kSubmissionVerificationRounds : 0;
  const auto prepared = Clock::now();
  absl::StatusOr<Evaluation> e = Evaluate(backend, spec);
  if (!e.ok()) return e.status();
  const auto measured = Clock::now();
  // A submission's outputs are always checked: they go back to the caller only if they pass.
  const bool check = request.check_correctness() || resolved.submission.has_value();
  if (check) {
    // After the measurement, on the outputs the caller gets back.
    const Reference reference = ComputeReference(problem, spec.inputs, HostWorkThreads());
    e->correctness = CheckOutputs(problem, spec.outputs, reference, spec.tolerance);
  }
  if (!e->verification_failure.empty()) {
    // A submission's wrong answer on fresh inputs fails the Run whatever its first output.
    e->correctness.set_checked(true);
    e->correctness.set_passed(false);
    e->correctness.set_detail(e->verification_failure);
  }
  const auto checked = Clock::now();
  state.metrics->ObserveKernelSamples(impl, backend.name(), e->measurement.samples_seconds);
  response->set_device(backend.name());
  response->set_implementation(impl);
  WriteEvaluation(*e, response);
  const Verdict verdict =
      WriteVerdict(*e, problem, device, spec.options, resolved.submission.has_value(), response);
  response->set_queue_seconds(queue_seconds);
  v1::RunTiming* timing = response->mutable_timing();
  timing->set_validate_seconds(SecondsBetween(t0, queued));
  timing->set_queue_seconds(queue_seconds);
  timing->set_handoff_seconds(std::min(handoff_seconds, queue_seconds));
  timing->set_prepare_seconds(SecondsBetween(dequeued, prepared));
  timing->set_host_to_device_seconds(e->measurement.host_to_device_seconds);
  timing->set_device_seconds(e->measurement.device_seconds);
  timing->set_device_to_host_seconds(e->measurement.device_to_host_seconds);
  timing->set_device_host_seconds(e->measurement.device_host_seconds);
  timing->set_kernel_seconds(e->stats.median);
  timing->set_check_seconds(check ? SecondsBetween(measured, checked) : 0);
  if (request.omit_outputs() || verdict.withhold_outputs) {
    response->clear_output();
    response->clear_residual_out();
  }
  state.metrics->ObserveCompute(backend.name(), SecondsBetween(started, Clock::now()));
  const auto answered = Clock::now();
  timing->set_respond_seconds(SecondsBetween(checked, answered));
  timing->set_server_seconds(SecondsBetween(t0, answered));
  return absl::OkStatus();
}

// The device kind whose devices can run `implementation` (empty: any): a built-in's, or
// CUDA for a name no device has where submissions are on and there are GPUs (a submission;
// an unknown name is then named by validation on the device chosen).
std::string KindServing(const ServiceState& state, const std::string& implementation) {
  if (implementation.empty()) return "";
  for (const auto& worker : state.devices->workers()) {
    if (worker->backend().HasImplementation(implementation)) return worker->backend().kind();
  }
  if (!state.find_submission || state.devices->OfKind("cuda").empty()) return "";
  return "cuda";
}

}  // namespace

void StartRun(ServiceState& state, Caller caller, const v1::RunRequest& request,
              v1::RunResponse* response, std::function<void(const absl::Status&)> done) {
  const auto t0 = Clock::now();
  auto refuse = [&](const absl::Status& s) { done(s); };
  if (absl::Status s = Admit(state, /*needs_devices=*/true); !s.ok()) return refuse(s);
  absl::StatusOr<Problem> problem = ValidateRunRequest(request, state.limits);
  if (!problem.ok()) return refuse(problem.status());
  absl::StatusOr<DeviceWorker*> device =
      request.device().empty()
          ? state.devices->LeastLoaded(KindServing(state, request.implementation()))
          : state.devices->FindHealthy(request.device(), "device");
  if (!device.ok()) return refuse(device.status());
  const Backend& backend = (*device)->backend();
  ResolvedImplementation impl{backend.DefaultImplementation(), std::nullopt};
  if (!request.implementation().empty()) {
    absl::StatusOr<ResolvedImplementation> resolved =
        ResolveImplementation(state, caller, backend, request.implementation(), "implementation");
    if (!resolved.ok()) return refuse(resolved.status());
    impl = *std::move(resolved);
  }
  if (absl::Status s = CheckTimerFits(request.timer(), backend, "timer"); !s.ok()) {
    return refuse(s);
  }
  if (request.profile()) {
    if (absl::Status s = CheckProfile(backend.capabilities(), backend.name(), "profile"); !s.ok()) {
      return refuse(s);
    }
  }
  if (absl::Status s = StillWanted(caller, "before it was queued"); !s.ok()) return refuse(s);
  // The request and the outputs it will get back stay in memory until it is answered.
  const std::uint64_t held =
      request.ByteSizeLong() + problem->TensorBytes() * (WritesResidual(problem->mode) ? 2 : 1);
  const std::uint64_t before = state.queued_bytes.fetch_add(held);
  if (state.limits.max_queued_bytes > 0 && before + held > state.limits.max_queued_bytes) {
    state.queued_bytes.fetch_sub(held);
    return refuse(absl::ResourceExhaustedError(absl::StrCat(
        "the server holds ", before, " bytes of queued Run work; this request needs ", held,
        " more, over --max-queued-bytes ", state.limits.max_queued_bytes, "; retry later")));
  }
  // `done` is shared with the job: whichever of the job, its refusal as it would start (the
  // owner's budget spent by then) and a refused Submit runs it, and
  // it gives the held bytes back first.
  auto shared_done = std::make_shared<std::function<void(const absl::Status&)>>(
      [&state, held, done = std::move(done)](const absl::Status& s) {
        state.queued_bytes.fetch_sub(held);
        done(s);
      });
  const auto queued = Clock::now();
  DeviceWorker* worker = *device;
  DeviceWorker::Job job = [&state, caller, &request, response, p = *std::move(problem),
                           impl = std::move(impl), t0, queued, worker,
                           shared_done](Backend& b, double queue_seconds) {
    (*shared_done)(EvaluateRun(state, b, caller, queue_seconds, worker->handoff_seconds(), request,
                               p, impl, t0, queued, response));
  };
  const absl::Status submitted =
      worker->Submit(std::move(job), caller.owner,
                     [shared_done](const absl::Status& refused) { (*shared_done)(refused); });
  if (!submitted.ok()) (*shared_done)(submitted);
}

}  // namespace kerneleval::server
