#include "server/core/benchmark_call.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/evaluation/benchmark_engine.h"

namespace kerneleval::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Call final : public BenchmarkCall, public std::enable_shared_from_this<Call> {
 public:
  Call(ServiceState& state, Caller caller, v1::BenchmarkRequest request,
       BenchmarkCallbacks callbacks)
      : state_(state),
        caller_(std::move(caller)),
        request_(std::move(request)),
        callbacks_(std::move(callbacks)) {}

  void Cancel() override { cancelled_.store(true); }

  // Validate, choose the devices, queue one job per device.
  absl::Status Start() {
    RETURN_IF_ERROR(Admit(state_, /*needs_devices=*/true));
    ASSIGN_OR_RETURN(plan_, ValidateBenchmarkRequest(request_, state_.suites, state_.limits));
    ASSIGN_OR_RETURN(std::vector<DeviceWorker*> devices, ChooseDevices());
    for (DeviceWorker* d : devices) RETURN_IF_ERROR(Resolve(d->backend()));
    if (!plan_.submissions.empty()) {
      // Submitted kernels run with every call checked; the built-ins ranked beside them get
      // the same device work between calls, and the report's protocol says so. Traffic is
      // counted for all of them too (after the timed samples, in windows of its own): the
      // L2 work floor (measurement_checks.h) holds in every protocol.
      plan_.protocol.set_check_every_call(true);
      plan_.protocol.set_measure_dram_bytes(true);
    }
    RETURN_IF_ERROR(StillWanted(caller_, "before it was queued"));
    // Reserved now, sent first and with every progress event: a client that cancels, even
    // during the first workload, still learns which partial run the store keeps.
    if (!callbacks_.run_id.empty()) {
      run_id_ = callbacks_.run_id;
    } else if (state_.results != nullptr) {
      run_id_ = store::ResultStore::NewRunId();
    }
    if (callbacks_.on_started) callbacks_.on_started(StartedEvent(devices));

    runs_.resize(devices.size());
    pending_jobs_ = devices.size();
    for (std::size_t i = 0; i < devices.size(); ++i) {
      BenchmarkPlan plan = plan_;
      plan.host_preparation = state_.host_preparation;
      if (request_.implementations_size() > 0) {
        plan.implementations.assign(request_.implementations().begin(),
                                    request_.implementations().end());
      } else {
        for (const auto& impl : devices[i]->backend().Implementations()) {
          if (!impl.test_only()) plan.implementations.push_back(impl.name());
        }
      }
      const absl::Status submitted = devices[i]->Submit(
          [self = shared_from_this(), i, plan = std::move(plan)](Backend& backend,
                                                                 double queue_seconds) {
            self->OnWorker(backend, queue_seconds, i, plan);
          },
          caller_.owner,
          [self = shared_from_this()](const absl::Status& refused) { self->EndJob(refused); });
      if (!submitted.ok()) {
        if (i == 0) return submitted;
        // Jobs already accepted still run (they stop at once) and end the call.
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_.store(true);
        failure_ = submitted;
        pending_jobs_ -= devices.size() - i;
        if (pending_jobs_ == 0) FinishLocked();
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

 private:
  v1::BenchmarkStarted StartedEvent(const std::vector<DeviceWorker*>& devices) const {
    v1::BenchmarkStarted started;
    started.set_run_id(run_id_);
    started.set_suite(plan_.suite.name());
    started.set_workload_count(static_cast<std::uint32_t>(plan_.workloads.size()));
    for (const DeviceWorker* d : devices) started.add_devices(d->backend().name());
    for (const std::string& impl : request_.implementations()) started.add_implementations(impl);
    *started.mutable_protocol() = plan_.protocol;
    return started;
  }

  // Each implementation the request names, as it resolves on `backend`: a submission is the
  // caller's (server/core/admission.h), and the protocol must fit the device. Implementations
  // first: a submission sent to a CPU server is refused as such, not by the protocol
  // (check_every_call) that every submission's benchmark carries.
  absl::Status Resolve(const Backend& backend) {
    for (int i = 0; i < request_.implementations_size(); ++i) {
      ASSIGN_OR_RETURN(ResolvedImplementation resolved,
                       ResolveImplementation(state_, caller_, backend, request_.implementations(i),
                                             absl::StrCat("implementations[", i, "]")));
      if (resolved.submission) {
        plan_.submissions[request_.implementations(i)] = {resolved.name,
                                                          std::move(*resolved.submission)};
      }
    }
    const v1::Protocol& p = plan_.protocol;
    return CheckProtocolFits(backend.capabilities(),
                             {p.cuda_graph(), p.check_every_call(), p.profile(), p.timer()},
                             backend.name());
  }

  absl::StatusOr<std::vector<DeviceWorker*>> ChooseDevices() const {
    const v1::BenchmarkRequest& req = request_;
    if (req.all_devices()) {
      std::string kind = "cuda";
      if (!req.device().empty()) {
        ASSIGN_OR_RETURN(DeviceWorker * d, state_.devices->Find(req.device(), "device"));
        kind = d->backend().kind();
      } else if (state_.devices->OfKind("cuda").empty()) {
        kind = "cpu";
      }
      return state_.devices->OfKind(kind);
    }
    if (!req.device().empty()) {
      ASSIGN_OR_RETURN(DeviceWorker * d, state_.devices->FindHealthy(req.device(), "device"));
      return std::vector<DeviceWorker*>{d};
    }
    ASSIGN_OR_RETURN(DeviceWorker * d, state_.devices->LeastLoaded());
    return std::vector<DeviceWorker*>{d};
  }

  bool ShouldStop() const {
    return cancelled_.load() || caller_.Cancelled() ||
           Clock::now().time_since_epoch().count() >= cap_ticks_.load() || caller_.DeadlinePassed();
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

  // A job that did not run (its caller went away, or its owner's budget was spent as it
  // would start) fails the call; the jobs on other devices stop too.
  void EndJob(const absl::Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.store(true);
    if (failure_.ok()) failure_ = why;
    if (--pending_jobs_ == 0) FinishLocked();
  }

  // On the device's worker thread.
  void OnWorker(Backend& backend, double queue_seconds, std::size_t index,
                const BenchmarkPlan& plan) {
    state_.metrics->ObserveQueueWait(backend.name(), queue_seconds);
    if (absl::Status s = StillWanted(caller_, InQueueOf(backend, queue_seconds)); !s.ok()) {
      if (run_id_.empty()) return EndJob(s);
      // The client already holds the run id (BenchmarkStarted): the store keeps the run, each
      // workload SKIPPED as a cancelled one's are, so that the id resolves whenever it left.
      cancelled_.store(true);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_before_start_.ok()) stopped_before_start_ = s;
    }
    StartCapClock();
    const auto t0 = Clock::now();
    DeviceRun run = BenchmarkOnDevice(
        backend, plan,
        [this](const v1::BenchmarkProgress& p) {
          if (cancelled_.load() || !callbacks_.on_progress) return;
          v1::BenchmarkProgress with_id = p;
          with_id.set_run_id(run_id_);
          callbacks_.on_progress(with_id);
        },
        [this] { return ShouldStop(); },
        [this, &backend](const std::string& impl, const std::vector<double>& samples) {
          state_.metrics->ObserveKernelSamples(impl, backend.name(), samples);
        });
    state_.metrics->ObserveCompute(backend.name(), SecondsSince(t0));
    std::lock_guard<std::mutex> lock(mu_);
    runs_[index] = std::move(run);
    if (--pending_jobs_ == 0) FinishLocked();
  }

  // Once every job has ended: the report, ranked, stored and in the metrics.
  void FinishLocked() {
    if (!failure_.ok()) return callbacks_.done(failure_);
    v1::BenchmarkReport report;
    report.set_suite(plan_.suite.name());
    *report.mutable_definition() = plan_.suite;
    *report.mutable_protocol() = plan_.protocol;
    std::vector<v1::WorkloadResult> results;
    bool complete = true;
    for (DeviceRun& run : runs_) {
      for (v1::WorkloadResult& r : run.results) results.push_back(std::move(r));
      *report.add_environments() = run.environment;
      complete = complete && run.complete;
    }
    std::set<std::string> submitted;
    for (const auto& entry : plan_.submissions) submitted.insert(entry.first);
    RejectCaughtSubmissions(submitted, &results);
    for (const v1::ImplementationSummary& s : RankResults(&results)) *report.add_summaries() = s;
    for (v1::WorkloadResult& r : results) *report.add_results() = std::move(r);
    report.set_complete(complete);
    report.set_wall_seconds(SecondsSince(t0_));
    // Queued for the store's writer thread: the device worker does not wait for the disk.
    if (callbacks_.record) {
      report.set_run_id(run_id_);
      callbacks_.record(report);
    } else if (state_.results != nullptr) {
      report.set_run_id(run_id_);
      report.set_run_id(state_.results->Record(report, caller_.owner));
    }
    // A run some device never started (its caller left while it was queued) is kept for its
    // id, not counted as a benchmark run.
    if (plan_.named_suite && stopped_before_start_.ok()) {
      state_.metrics->RecordReport(report, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    }
    if (!stopped_before_start_.ok()) return callbacks_.done(stopped_before_start_);
    if (caller_.DeadlinePassed()) {
      return callbacks_.done(
          absl::DeadlineExceededError("deadline passed while the benchmark ran; stopped early"));
    }
    if (cancelled_.load() || caller_.Cancelled()) {
      return callbacks_.done(absl::CancelledError("benchmark cancelled"));
    }
    callbacks_.done(std::move(report));
  }

  ServiceState& state_;
  const Caller caller_;
  const v1::BenchmarkRequest request_;
  const BenchmarkCallbacks callbacks_;
  const Clock::time_point t0_ = Clock::now();
  BenchmarkPlan plan_;
  std::once_flag cap_started_;
  std::atomic<Clock::rep> cap_ticks_{Clock::time_point::max().time_since_epoch().count()};
  std::atomic<bool> cancelled_{false};
  // Why a device's job never started (its caller went away while it was queued), under mu_.
  absl::Status stopped_before_start_;
  std::string run_id_;  // "" without a results store; set once in Start()

  std::mutex mu_;
  std::size_t pending_jobs_ = 0;
  std::vector<DeviceRun> runs_;
  absl::Status failure_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<BenchmarkCall>> StartBenchmark(ServiceState& state, Caller caller,
                                                              v1::BenchmarkRequest request,
                                                              BenchmarkCallbacks callbacks) {
  auto call =
      std::make_shared<Call>(state, std::move(caller), std::move(request), std::move(callbacks));
  RETURN_IF_ERROR(call->Start());
  return call;
}

}  // namespace kerneleval::server
