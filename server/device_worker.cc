#include "server/device_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace kerneleval::server {
namespace {

constexpr auto kIdleHealthCheck = std::chrono::seconds(1);

}  // namespace

std::chrono::microseconds DefaultWorkerIdleSpin() {
  return std::thread::hardware_concurrency() >= 8 ? std::chrono::microseconds(500)
                                                  : std::chrono::microseconds(0);
}

DeviceWorker::DeviceWorker(std::unique_ptr<Backend> backend, std::size_t capacity,
                           DepthObserver on_depth, HealthObserver on_health,
                           std::function<void()> on_failed)
    : backend_(std::move(backend)),
      capacity_(capacity),
      on_depth_(std::move(on_depth)),
      on_health_(std::move(on_health)),
      on_failed_(std::move(on_failed)) {
  backend_->set_fault_listener([this] {
    if (!fault_reported_.exchange(true) && on_health_) on_health_(false);
  });
}

DeviceWorker::~DeviceWorker() { Stop(); }

void DeviceWorker::Start(std::function<void(const absl::Status&)> on_warm) {
  thread_ = std::thread([this, on_warm = std::move(on_warm)] { Loop(on_warm); });
}

absl::Status DeviceWorker::Submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError(absl::StrCat("device ", name(), " is shutting down"));
    }
    if (queue_.size() >= capacity_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue of device ", name(), " is full (", capacity_, " jobs waiting)"));
    }
    queue_.push_back({std::move(job), std::chrono::steady_clock::now()});
    queued_.store(queue_.size(), std::memory_order_release);
    // Reported under the lock so that a late report cannot overwrite a newer depth.
    if (on_depth_) on_depth_(queue_.size());
  }
  cv_.notify_one();
  return absl::OkStatus();
}

std::size_t DeviceWorker::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (running_job_ ? 1 : 0);
}

void DeviceWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeviceWorker::RecoverDevice() {
  // The job that hit the fault has answered its caller; queued jobs wait until the device
  // is rebuilt. Retries back off so that a dead device does not spin.
  if (!fault_reported_.exchange(true) && on_health_) on_health_(false);
  for (int attempt = 0; attempt < 5 && !backend_->Healthy(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    const absl::Status s = backend_->Recover();
    Log(s.ok() ? LogLevel::kWarning : LogLevel::kError,
        absl::StrCat(name(), " fault: recovery attempt ", attempt + 1, ": ",
                     s.ok() ? "device rebuilt" : s.ToString()));
  }
  gave_up_ = !backend_->Healthy();
  if (!gave_up_) {
    fault_reported_.store(false);
    if (on_health_) on_health_(true);
  } else {
    LogError(absl::StrCat(name(),
                          " could not be rebuilt in this process; liveness turns NOT_SERVING so "
                          "that the orchestrator restarts the server"));
    if (on_failed_) on_failed_();
  }
}

void DeviceWorker::Loop(std::function<void(const absl::Status&)> on_warm) {
  const absl::Status warm = backend_->WarmUp();
  if (on_warm) on_warm(warm);
  auto free_since = std::chrono::steady_clock::now();  // the previous job's end
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Idle, the device is still watched: a device host that died between jobs is replaced
      // now rather than failing the next request.
      while (
          !cv_.wait_for(lock, kIdleHealthCheck, [this] { return stopping_ || !queue_.empty(); })) {
        lock.unlock();
        if (!gave_up_ && !backend_->Healthy()) RecoverDevice();
        lock.lock();
      }
      // Drain: accepted work runs even while stopping.
      if (queue_.empty()) return;
      entry = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_release);
      if (on_depth_) on_depth_(queue_.size());
      running_job_ = true;
      const auto now = std::chrono::steady_clock::now();
      handoff_seconds_ =
          std::chrono::duration<double>(now - std::max(entry.enqueued, free_since)).count();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - entry.enqueued).count();
    entry.job(*backend_, waited);
    if (!backend_->Healthy()) RecoverDevice();
    free_since = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_job_ = false;
    }
    SpinForNextJob();
  }
}

void DeviceWorker::SpinForNextJob() const {
  if (idle_spin_.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + idle_spin_;
  while (queued_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace kerneleval::server
