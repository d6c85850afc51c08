#include "server/device/tenant_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace kerneleval::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TenantBackend::TenantBackend(std::unique_ptr<Backend> device, HostFactory make_host,
                             TenantHostOptions options)
    : device_(std::move(device)), make_host_(std::move(make_host)), options_(options) {
  // The device's own faults drop readiness; a tenant host's do not (its caller hears of it).
  device_->set_fault_listener([this] { ReportFault(); });
  sweeper_ = std::thread([this] { SweepIdle(); });
}

TenantBackend::~TenantBackend() {
  std::vector<Host> stopped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    stopped.swap(hosts_);
  }
  wake_.notify_all();
  sweeper_.join();
  // Hosts end here, outside the lock (each may wait for its process to exit).
}

std::vector<std::string> TenantBackend::Tenants() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Host& h : hosts_) out.push_back(h.tenant);
  return out;
}

std::size_t TenantBackend::hosts_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

std::vector<std::string> TenantBackend::LoadedSubmissions(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Host& h : hosts_) {
    if (h.tenant != tenant) continue;
    for (const auto& [id, used] : h.modules) out.push_back(id);
  }
  return out;
}

void TenantBackend::UnloadSubmission(const std::string& tenant, const std::string& id) {
  std::shared_ptr<Backend> stopped;  // ends after the lock is released
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = std::find_if(hosts_.begin(), hosts_.end(), [&](const Host& h) {
      return h.tenant == tenant && h.modules.count(id) > 0;
    });
    if (it == hosts_.end()) return;
    if (in_use_ == tenant) {
      it->stop_at_next_job = true;  // its job ends first
      return;
    }
    LogInfo(absl::StrCat(name(), ": stopping the tenant host of ", tenant, " to unload ", id,
                         " (deleted)"));
    stopped = std::move(it->backend);
    hosts_.erase(it);
  }
}

absl::StatusOr<std::shared_ptr<Backend>> TenantBackend::HostFor(const std::string& tenant,
                                                                const std::string& loading) {
  std::shared_ptr<Backend> stale, evicted;  // end after the lock is released
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ = tenant;
    const auto it = std::find_if(hosts_.begin(), hosts_.end(),
                                 [&](const Host& h) { return h.tenant == tenant; });
    if (it != hosts_.end() && !StaleLocked(*it, loading, Clock::now())) {
      Host h = std::move(*it);
      hosts_.erase(it);
      h.last_used = Clock::now();
      hosts_.insert(hosts_.begin(), h);
      return h.backend;
    }
    if (it != hosts_.end()) {
      // Between two jobs of its owner, the one clean moment: the modules go with the host,
      // and a new one loads what this job runs.
      LogInfo(absl::StrCat(name(), ": restarting the tenant host of ", tenant,
                           ": it holds a deleted module, or one unused for the idle time"));
      stale = std::move(it->backend);
      hosts_.erase(it);
    }
    if (hosts_.size() >= std::max<std::size_t>(options_.max_hosts, 1)) {
      // Only one job runs on a device at a time, so every other host is idle: the least
      // recently used one makes room.
      evicted = std::move(hosts_.back().backend);
      LogInfo(absl::StrCat(name(), ": stopping the tenant host of ", hosts_.back().tenant,
                           " (least recently used) to start one for ", tenant));
      hosts_.pop_back();
    }
  }
  stale.reset();
  evicted.reset();
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<Backend>> made = make_host_(tenant);
  if (!made.ok()) return made.status();
  std::shared_ptr<Backend> host = std::move(*made);
  if (absl::Status warm = host->WarmUp(); !warm.ok()) {
    return absl::UnavailableError(
        absl::StrCat(name(), ": the submission host did not start: ", warm.message()));
  }
  LogInfo(absl::StrCat(name(), ": tenant host for ", tenant, " started in ", SecondsSince(start),
                       " s"));
  std::lock_guard<std::mutex> lock(mu_);
  ++started_;
  hosts_.insert(hosts_.begin(), Host{tenant, host, Clock::now()});
  return host;
}

absl::Status TenantBackend::AddSubmission(const SubmittedKernel& kernel) {
  if (kernel.tenant.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        name(), ": submission ", kernel.submission.id(), " names no owner to run for"));
  }
  absl::StatusOr<std::shared_ptr<Backend>> host = HostFor(kernel.tenant, kernel.submission.id());
  if (!host.ok()) return host.status();
  RETURN_IF_ERROR((*host)->AddSubmission(kernel));
  std::lock_guard<std::mutex> lock(mu_);
  for (Host& h : hosts_) {
    if (h.backend == *host) h.modules[kernel.submission.id()] = Clock::now();
  }
  return absl::OkStatus();
}

absl::StatusOr<Measurement> TenantBackend::Measure(const Problem& problem, const HostInputs& inputs,
                                                   const HostOutputs& outputs,
                                                   const std::string& impl,
                                                   const MeasureOptions& options) {
  if (options.tenant.empty()) {
    if (IsSubmissionId(impl)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), ": ", impl, " is submitted code and the call names no owner"));
    }
    return device_->Measure(problem, inputs, outputs, impl, options);
  }
  std::shared_ptr<Backend> host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Host& h : hosts_) {
      if (h.tenant != options.tenant) continue;
      host = h.backend;
      in_use_ = h.tenant;
      break;
    }
  }
  if (!host) {
    // Stopped since its job loaded the submission (idle, or to make room): nothing ran.
    return absl::UnavailableError(
        absl::StrCat(name(), ": the submission host was stopped before the call; retry"));
  }
  absl::StatusOr<Measurement> m = host->Measure(problem, inputs, outputs, impl, options);
  const bool lost = !host->Healthy();
  std::shared_ptr<Backend> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_.clear();
    const auto it = std::find_if(hosts_.begin(), hosts_.end(),
                                 [&](const Host& h) { return h.backend == host; });
    if (it != hosts_.end()) {
      if (lost) {
        // A fault or a crash ends this owner's host only; the next job starts another.
        ended = std::move(it->backend);
        hosts_.erase(it);
      } else {
        it->last_used = Clock::now();
      }
    }
  }
  host.reset();
  ended.reset();  // outside the lock: it may wait for its process to exit
  if (lost) {
    LogWarning(absl::StrCat(name(), ": the tenant host of ", options.tenant,
                            " stopped after a fault; the device keeps serving"));
  }
  return m;
}

bool TenantBackend::StaleLocked(const Host& h, const std::string& loading,
                                Clock::time_point now) const {
  if (h.stop_at_next_job) return true;
  const auto idle = std::chrono::duration<double>(options_.idle_seconds);
  for (const auto& [id, used] : h.modules) {
    if (id != loading && now - used >= idle) return true;
  }
  return false;
}

void TenantBackend::SweepIdle() {
  const auto idle = std::chrono::duration<double>(options_.idle_seconds);
  const auto period = std::min<Clock::duration>(
      std::chrono::seconds(1),
      std::chrono::duration_cast<Clock::duration>(idle / 2) + std::chrono::milliseconds(1));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, period);
    std::vector<Host> stopped;
    for (auto it = hosts_.begin(); it != hosts_.end();) {
      if (it->tenant != in_use_ && Clock::now() - it->last_used >= idle) {
        LogInfo(absl::StrCat(name(), ": stopping the idle tenant host of ", it->tenant));
        stopped.push_back(std::move(*it));
        it = hosts_.erase(it);
      } else {
        ++it;
      }
    }
    if (stopped.empty()) continue;
    lock.unlock();
    stopped.clear();  // each may wait for its process to exit
    lock.lock();
  }
}

}  // namespace kerneleval::server
