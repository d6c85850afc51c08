#include "server/kerneleval_service.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/benchmark_engine.h"
#include "server/correctness.h"
#include "server/sol.h"
#include "server/statistics.h"
#include "server/status_macros.h"
#include "server/suites.h"

namespace kerneleval::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool DeadlinePassed(const grpc::CallbackServerContext* context) {
  return context->deadline() <= std::chrono::system_clock::now();
}

// Work starts only while its caller still waits for it; `when` says where it stood ("before
// it was queued", "after 2.1 s in the queue of cpu"). The deadline is checked first: gRPC
// cancels a call whose deadline has passed too, and the deadline is the cause to report.
absl::Status StillWanted(const grpc::CallbackServerContext* context, const std::string& when) {
  if (DeadlinePassed(context)) {
    return absl::DeadlineExceededError(absl::StrCat("deadline passed ", when, "; not started"));
  }
  if (context->IsCancelled()) {
    return absl::CancelledError(absl::StrCat("cancelled ", when, "; not started"));
  }
  return absl::OkStatus();
}

std::string InQueueOf(const Backend& backend, double queue_seconds) {
  return absl::StrCat("after ", queue_seconds, " s in the queue of ", backend.name());
}

std::string CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

// Whether the server takes work at all. The bearer token was checked before the call got
// here (server/auth.h).
absl::Status Admit(const ServiceState& state, bool needs_ready) {
  if (state.draining.load()) {
    return absl::UnavailableError("server is shutting down and accepts no new requests");
  }
  if (needs_ready && !state.warmed.load()) {
    return absl::UnavailableError("server is warming up; retry when readiness is SERVING");
  }
  return absl::OkStatus();
}

// A timer the device has: the host clock for CPUs, CUPTI or CUDA events for GPUs.
absl::Status CheckTimerFits(v1::Timer timer, const Backend& backend, const char* field) {
  if (timer == v1::TIMER_UNSPECIFIED) return absl::OkStatus();
  const bool gpu = DeviceKind(backend.name()) == "cuda";
  if (gpu && timer == v1::TIMER_HOST_CLOCK) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": TIMER_HOST_CLOCK is for the CPU backend, not ", backend.name()));
  }
  if (!gpu && timer != v1::TIMER_HOST_CLOCK) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", v1::Timer_Name(timer),
                                                   " needs a CUDA device, not ", backend.name()));
  }
  return absl::OkStatus();
}

// Finishes a unary RPC and records it.
void FinishUnary(ServiceState* state, grpc::ServerUnaryReactor* reactor, const char* method,
                 const grpc::Status& status, Clock::time_point t0, std::size_t received,
                 std::size_t sent) {
  state->metrics->RpcFinished(method, CodeName(status.error_code()), SecondsSince(t0), received,
                              status.ok() ? sent : 0);
  reactor->Finish(status);
}

std::vector<PeakBandwidth> DevicePeaks(const v1::Device& d) {
  std::vector<PeakBandwidth> peaks;
  if (d.peak_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, d.peak_bytes_per_second()});
  }
  if (d.datasheet_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_DATASHEET, d.datasheet_bytes_per_second()});
  }
  if (d.measured_copy_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_MEASURED_COPY, d.measured_copy_bytes_per_second()});
  }
  return peaks;
}

// Runs on the device worker: the Run job proper.
grpc::Status ExecuteRun(ServiceState* state, Backend& backend, double queue_seconds,
                        grpc::CallbackServerContext* context, const v1::RunRequest& request,
                        v1::RunResponse* response, const Problem& problem,
                        const std::string& impl) {
  state->metrics->ObserveQueueWait(backend.name(), queue_seconds);
  if (absl::Status s = StillWanted(context, InQueueOf(backend, queue_seconds)); !s.ok()) {
    return ToGrpcStatus(s);
  }
  const auto t0 = Clock::now();
  const bool writes_residual = WritesResidual(problem.mode);
  v1::Tensor* out = response->mutable_output();
  out->set_dtype(request.hidden_states().dtype());
  *out->mutable_shape() = request.hidden_states().shape();
  out->mutable_data()->resize(problem.RowBytes());
  HostOutputs outputs{out->mutable_data()->data(), nullptr};
  if (writes_residual) {
    v1::Tensor* res = response->mutable_residual_out();
    res->set_dtype(request.residual().dtype());
    *res->mutable_shape() = request.residual().shape();
    res->mutable_data()->resize(problem.RowBytes());
    outputs.residual_out = res->mutable_data()->data();
  }
  MeasureOptions options;
  options.warmup = request.warmup();
  options.repetitions = request.repetitions() == 0 ? 1 : request.repetitions();
  options.cold = false;
  // Events unless CUPTI is asked for: CUPTI's two forced activity flushes per timed call
  // cost ~0.5 ms on an H200, 300x a small kernel (docs/results/device-isolation-h200.md).
  options.timer = request.timer() != v1::TIMER_UNSPECIFIED ? request.timer()
                  : DeviceKind(backend.name()) == "cuda"   ? v1::TIMER_CUDA_EVENTS
                                                           : v1::TIMER_UNSPECIFIED;
  options.should_stop = [context] { return context->IsCancelled(); };
  const HostInputs inputs{request.hidden_states().data().data(), request.residual().data().data(),
                          request.weight().data().data()};
  absl::StatusOr<Measurement> m = backend.Measure(problem, inputs, outputs, impl, options);
  if (!m.ok()) return ToGrpcStatus(m.status());
  state->metrics->ObserveKernelSamples(impl, backend.name(), m->samples_seconds);

  response->set_device(backend.name());
  response->set_implementation(impl);
  response->set_timer(m->timer);
  const SampleStats stats = ComputeStats(m->samples_seconds);
  ToProto(stats, response->mutable_latency());
  const std::uint64_t bytes =
      BytesMoved(problem.dtype, problem.mode, problem.batch, problem.hidden);
  response->set_bytes_moved(bytes);
  if (stats.median > 0) response->set_bytes_per_second(static_cast<double>(bytes) / stats.median);
  for (v1::SolFigure& f : SolFigures(bytes, stats.median, DevicePeaks(backend.Describe()))) {
    *response->add_sol() = f;
  }
  response->set_queue_seconds(queue_seconds);

  if (request.check_correctness()) {
    const std::size_t n = problem.RowElements();
    std::vector<double> ref_out(n), ref_res(writes_residual ? n : 0);
    FusedAddRmsNormReference(problem.dtype, problem.batch, problem.hidden, problem.eps,
                             inputs.hidden_states, inputs.residual, inputs.weight, ref_out.data(),
                             writes_residual ? ref_res.data() : nullptr);
    const v1::Tolerance tol = ResolveTolerance(problem.dtype, v1::Tolerance());
    v1::Correctness c =
        CheckAgainstReference(problem.dtype, outputs.output, ref_out.data(), n, tol);
    if (writes_residual) {
      c = MergeCorrectness(
          c, CheckAgainstReference(problem.dtype, outputs.residual_out, ref_res.data(), n, tol));
    }
    *response->mutable_correctness() = c;
  }
  if (request.omit_outputs()) {
    response->clear_output();
    response->clear_residual_out();
  }
  state->metrics->ObserveCompute(backend.name(), SecondsSince(t0));
  return grpc::Status::OK;
}

// Server-streaming Benchmark: device jobs push progress events; writes go out one at a
// time in order; the report goes last, then the status.
class BenchmarkReactor final : public grpc::ServerWriteReactor<v1::BenchmarkEvent> {
 public:
  BenchmarkReactor(ServiceState* state, grpc::CallbackServerContext* context,
                   const v1::BenchmarkRequest* request)
      : state_(state), context_(context), request_(request), t0_(Clock::now()) {
    state_->metrics->RpcStarted("Benchmark");
    received_ = request->ByteSizeLong();
    const absl::Status started = Start();
    if (!started.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      final_status_ = ToGrpcStatus(started);
      finishing_ = true;
      MaybeFinishLocked();
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      // The client went away: stop the device jobs and drop what is queued.
      cancelled_.store(true);
      pending_writes_.clear();
    } else {
      pending_writes_.pop_front();
    }
    WriteNextLocked();
    MaybeFinishLocked();
  }

  void OnCancel() override { cancelled_.store(true); }

  void OnDone() override {
    state_->metrics->RpcFinished("Benchmark", CodeName(final_status_.error_code()),
                                 SecondsSince(t0_), received_, sent_);
    delete this;
  }

 private:
  absl::Status Start() {
    RETURN_IF_ERROR(Admit(*state_, /*needs_ready=*/true));
    const v1::BenchmarkRequest& req = *request_;
    // Suite.
    if (!req.suite().empty() && req.has_custom_suite()) {
      return absl::InvalidArgumentError("suite, custom_suite: give one, not both");
    }
    if (req.suite().empty() && !req.has_custom_suite()) {
      return absl::InvalidArgumentError("suite: required (a suite name, or custom_suite)");
    }
    if (!req.suite().empty()) {
      const v1::SuiteDefinition* found = nullptr;
      std::vector<std::string> names;
      for (const v1::SuiteDefinition& s : state_->suites) {
        names.push_back(s.name());
        if (s.name() == req.suite()) found = &s;
      }
      if (found == nullptr) {
        return absl::NotFoundError(absl::StrCat(
            "suite: '", req.suite(), "' not found (available: ", absl::StrJoin(names, ", "), ")"));
      }
      plan_.suite = *found;
      named_suite_ = true;
    } else {
      RETURN_IF_ERROR(ValidateSuite(req.custom_suite(), "custom_suite"));
      plan_.suite = req.custom_suite();
      if (plan_.suite.name().empty()) plan_.suite.set_name("custom");
    }
    RETURN_IF_ERROR(CheckSuiteLimits(plan_.suite));
    ASSIGN_OR_RETURN(plan_.protocol, ResolveProtocol(req.protocol(), state_->limits));

    // Devices.
    std::vector<DeviceWorker*> devices;
    if (req.all_devices()) {
      std::string kind = "cuda";
      if (!req.device().empty()) {
        ASSIGN_OR_RETURN(DeviceWorker * d, state_->devices->Find(req.device(), "device"));
        kind = DeviceKind(d->name());
      } else if (state_->devices->OfKind("cuda").empty()) {
        kind = "cpu";
      }
      devices = state_->devices->OfKind(kind);
    } else if (!req.device().empty()) {
      ASSIGN_OR_RETURN(DeviceWorker * d, state_->devices->FindHealthy(req.device(), "device"));
      devices.push_back(d);
    } else {
      ASSIGN_OR_RETURN(DeviceWorker * d, state_->devices->LeastLoaded());
      devices.push_back(d);
    }
    for (DeviceWorker* d : devices) {
      RETURN_IF_ERROR(CheckProtocolFits(plan_.protocol, d->backend()));
      for (int i = 0; i < req.implementations_size(); ++i) {
        if (!d->backend().HasImplementation(req.implementations(i))) {
          std::vector<std::string> names;
          for (const auto& impl : d->backend().Implementations()) names.push_back(impl.name());
          return absl::NotFoundError(absl::StrCat(
              "implementations[", i, "]: '", req.implementations(i), "' is not available on ",
              d->name(), " (available: ", absl::StrJoin(names, ", "), ")"));
        }
      }
    }
    RETURN_IF_ERROR(StillWanted(context_, "before it was queued"));

    runs_.resize(devices.size());
    pending_jobs_ = devices.size();
    for (std::size_t i = 0; i < devices.size(); ++i) {
      BenchmarkPlan plan = plan_;
      if (req.implementations_size() > 0) {
        plan.implementations.assign(req.implementations().begin(), req.implementations().end());
      } else {
        for (const auto& impl : devices[i]->backend().Implementations()) {
          if (!impl.test_only()) plan.implementations.push_back(impl.name());
        }
      }
      const absl::Status submitted = devices[i]->Submit(
          [this, i, plan = std::move(plan)](Backend& backend, double queue_seconds) {
            RunOnDevice(backend, queue_seconds, i, plan);
          });
      if (!submitted.ok()) {
        // Jobs already accepted still run (they stop at once) and finish the RPC.
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_.store(true);
        final_status_ = ToGrpcStatus(submitted);
        pending_jobs_ -= devices.size() - i;
        if (pending_jobs_ > 0) return absl::OkStatus();
        return submitted;
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckSuiteLimits(const v1::SuiteDefinition& suite) const {
    if (suite.workloads_size() > 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat("custom_suite.workloads: ", suite.workloads_size(), " is over 1000"));
    }
    for (int i = 0; i < suite.workloads_size(); ++i) {
      ASSIGN_OR_RETURN(WorkloadShape shape, ResolveShape(suite, suite.workloads(i)));
      const std::uint64_t bytes = static_cast<std::uint64_t>(shape.batch) *
                                  static_cast<std::uint64_t>(shape.hidden) *
                                  (suite.dtype() == v1::DTYPE_FP32 ? 4 : 2);
      if (bytes > state_->limits.max_tensor_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "workloads[", i, "]: ", shape.batch, " x ", shape.hidden, " needs ", bytes,
            " bytes per tensor, over the server limit of ", state_->limits.max_tensor_bytes));
      }
    }
    return absl::OkStatus();
  }

  static absl::Status CheckProtocolFits(const v1::Protocol& p, const Backend& backend) {
    if (p.cuda_graph() && DeviceKind(backend.name()) != "cuda") {
      return absl::InvalidArgumentError(absl::StrCat(
          "protocol.cuda_graph: graph replay needs a CUDA device, not ", backend.name()));
    }
    return CheckTimerFits(p.timer(), backend, "protocol.timer");
  }

  bool ShouldStop() const {
    return cancelled_.load() || context_->IsCancelled() ||
           Clock::now().time_since_epoch().count() >= cap_ticks_.load() || DeadlinePassed(context_);
  }

  // The time cap counts from the first device that starts: time spent queued behind other
  // work is not the benchmark's (the client's deadline covers the wait).
  void StartCapClock() {
    std::call_once(cap_started_, [this] {
      const auto cap = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(plan_.protocol.max_total_seconds()));
      cap_ticks_.store((Clock::now() + cap).time_since_epoch().count());
    });
  }

  // On the device's worker thread.
  void RunOnDevice(Backend& backend, double queue_seconds, std::size_t index,
                   const BenchmarkPlan& plan) {
    state_->metrics->ObserveQueueWait(backend.name(), queue_seconds);
    if (absl::Status s = StillWanted(context_, InQueueOf(backend, queue_seconds)); !s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_.store(true);  // jobs on other devices stop too
      if (final_status_.ok()) final_status_ = ToGrpcStatus(s);
      if (--pending_jobs_ == 0) FinishReportLocked();
      return;
    }
    StartCapClock();
    const auto t0 = Clock::now();
    DeviceRun run = RunSuiteOnDevice(
        backend, plan,
        [this](const v1::BenchmarkProgress& p) {
          v1::BenchmarkEvent e;
          *e.mutable_progress() = p;
          Enqueue(std::move(e));
        },
        [this] { return ShouldStop(); },
        [this, &backend](const std::string& impl, const std::vector<double>& samples) {
          state_->metrics->ObserveKernelSamples(impl, backend.name(), samples);
        });
    state_->metrics->ObserveCompute(backend.name(), SecondsSince(t0));
    std::lock_guard<std::mutex> lock(mu_);
    runs_[index] = std::move(run);
    if (--pending_jobs_ == 0) FinishReportLocked();
  }

  void FinishReportLocked() {
    if (!final_status_.ok()) {
      finishing_ = true;
      MaybeFinishLocked();
      return;
    }
    v1::BenchmarkEvent e;
    v1::BenchmarkReport* report = e.mutable_report();
    report->set_suite(plan_.suite.name());
    *report->mutable_definition() = plan_.suite;
    *report->mutable_protocol() = plan_.protocol;
    std::vector<v1::WorkloadResult> results;
    bool complete = true;
    for (DeviceRun& run : runs_) {
      for (v1::WorkloadResult& r : run.results) results.push_back(std::move(r));
      *report->add_environments() = run.environment;
      complete = complete && run.complete;
    }
    for (const v1::ImplementationSummary& s : RankResults(&results)) *report->add_summaries() = s;
    for (v1::WorkloadResult& r : results) *report->add_results() = std::move(r);
    report->set_complete(complete);
    report->set_wall_seconds(SecondsSince(t0_));
    if (named_suite_) RecordMetrics(*report);
    if (DeadlinePassed(context_)) {
      final_status_ = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                   "deadline passed while the benchmark ran; stopped early");
    } else if (cancelled_.load() || context_->IsCancelled()) {
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "benchmark cancelled");
    } else {
      pending_writes_.push_back(std::move(e));
      WriteNextLocked();
    }
    finishing_ = true;
    MaybeFinishLocked();
  }

  void RecordMetrics(const v1::BenchmarkReport& report) {
    state_->metrics->RecordReport(report, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  }

  void Enqueue(v1::BenchmarkEvent e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_.load()) return;
    pending_writes_.push_back(std::move(e));
    WriteNextLocked();
  }

  void WriteNextLocked() {
    if (writing_ || pending_writes_.empty()) return;
    writing_ = true;
    sent_ += pending_writes_.front().ByteSizeLong();
    StartWrite(&pending_writes_.front());
  }

  void MaybeFinishLocked() {
    if (finishing_ && !finished_ && !writing_ && pending_writes_.empty()) {
      finished_ = true;
      Finish(final_status_);
    }
  }

  ServiceState* state_;
  grpc::CallbackServerContext* context_;
  const v1::BenchmarkRequest* request_;
  const Clock::time_point t0_;
  std::once_flag cap_started_;
  std::atomic<Clock::rep> cap_ticks_{Clock::time_point::max().time_since_epoch().count()};
  std::size_t received_ = 0;
  std::size_t sent_ = 0;
  BenchmarkPlan plan_;
  bool named_suite_ = false;
  std::atomic<bool> cancelled_{false};

  std::mutex mu_;
  std::deque<v1::BenchmarkEvent> pending_writes_;  // front() is in flight while writing_
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  std::size_t pending_jobs_ = 0;
  std::vector<DeviceRun> runs_;
  grpc::Status final_status_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* KernelEvalService::Run(grpc::CallbackServerContext* context,
                                                 const v1::RunRequest* request,
                                                 v1::RunResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("Run");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::size_t received = request->ByteSizeLong();
  auto fail = [&](const absl::Status& s) {
    FinishUnary(state_, reactor, "Run", ToGrpcStatus(s), t0, received, 0);
    return reactor;
  };
  if (absl::Status s = Admit(*state_, /*needs_ready=*/true); !s.ok()) return fail(s);
  absl::StatusOr<Problem> problem = ValidateRunRequest(*request, state_->limits);
  if (!problem.ok()) return fail(problem.status());

  absl::StatusOr<DeviceWorker*> device =
      request->device().empty() ? state_->devices->LeastLoaded()
                                : state_->devices->FindHealthy(request->device(), "device");
  if (!device.ok()) return fail(device.status());
  std::string impl = request->implementation();
  if (impl.empty()) {
    impl = (*device)->backend().DefaultImplementation();
  } else if (!(*device)->backend().HasImplementation(impl)) {
    return fail(absl::NotFoundError(
        absl::StrCat("implementation: '", impl, "' is not available on ", (*device)->name())));
  }
  if (absl::Status s = CheckTimerFits(request->timer(), (*device)->backend(), "timer"); !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = StillWanted(context, "before it was queued"); !s.ok()) return fail(s);
  ServiceState* state = state_;
  const absl::Status submitted =
      (*device)->Submit([state, reactor, context, request, response, p = *problem, impl, t0,
                         received](Backend& backend, double queue_seconds) {
        const grpc::Status status =
            ExecuteRun(state, backend, queue_seconds, context, *request, response, p, impl);
        FinishUnary(state, reactor, "Run", status, t0, received, response->ByteSizeLong());
      });
  if (!submitted.ok()) return fail(submitted);
  return reactor;
}

grpc::ServerWriteReactor<v1::BenchmarkEvent>* KernelEvalService::Benchmark(
    grpc::CallbackServerContext* context, const v1::BenchmarkRequest* request) {
  return new BenchmarkReactor(state_, context, request);
}

grpc::ServerUnaryReactor* KernelEvalService::ListSuites(grpc::CallbackServerContext* context,
                                                        const v1::ListSuitesRequest* request,
                                                        v1::ListSuitesResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("ListSuites");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status s = Admit(*state_, /*needs_ready=*/false);
  if (s.ok()) {
    for (const v1::SuiteDefinition& suite : state_->suites) *response->add_suites() = suite;
  }
  FinishUnary(state_, reactor, "ListSuites", ToGrpcStatus(s), t0, request->ByteSizeLong(),
              response->ByteSizeLong());
  return reactor;
}

grpc::ServerUnaryReactor* KernelEvalService::ListDevices(grpc::CallbackServerContext* context,
                                                         const v1::ListDevicesRequest* request,
                                                         v1::ListDevicesResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("ListDevices");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status s = Admit(*state_, /*needs_ready=*/false);
  if (s.ok()) {
    for (const auto& w : state_->devices->workers()) {
      v1::Device d = w->backend().Describe();
      d.set_healthy(w->backend().Healthy());
      d.set_queue_depth(static_cast<std::uint32_t>(w->load()));
      d.set_queue_capacity(static_cast<std::uint32_t>(w->capacity()));
      *response->add_devices() = std::move(d);
    }
  }
  FinishUnary(state_, reactor, "ListDevices", ToGrpcStatus(s), t0, request->ByteSizeLong(),
              response->ByteSizeLong());
  return reactor;
}

grpc::ServerUnaryReactor* KernelEvalService::ListImplementations(
    grpc::CallbackServerContext* context, const v1::ListImplementationsRequest* request,
    v1::ListImplementationsResponse* response) {
  const auto t0 = Clock::now();
  state_->metrics->RpcStarted("ListImplementations");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status s = Admit(*state_, /*needs_ready=*/false);
  if (s.ok()) {
    std::vector<DeviceWorker*> devices;
    if (request->device().empty()) {
      for (const auto& w : state_->devices->workers()) devices.push_back(w.get());
    } else {
      absl::StatusOr<DeviceWorker*> d = state_->devices->Find(request->device(), "device");
      if (d.ok()) {
        devices.push_back(*d);
      } else {
        s = d.status();
      }
    }
    std::vector<std::string> seen;
    for (DeviceWorker* d : devices) {
      for (const v1::Implementation& impl : d->backend().Implementations()) {
        if (std::find(seen.begin(), seen.end(), impl.name()) != seen.end()) continue;
        seen.push_back(impl.name());
        *response->add_implementations() = impl;
      }
    }
  }
  FinishUnary(state_, reactor, "ListImplementations", ToGrpcStatus(s), t0, request->ByteSizeLong(),
              response->ByteSizeLong());
  return reactor;
}

}  // namespace kerneleval::server
