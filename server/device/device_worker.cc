#include "server/device/device_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace kerneleval::server {
namespace {

constexpr auto kIdleHealthCheck = std::chrono::seconds(1);
// A device given up on takes no new work, so no job would ever try it again: an idle worker
// does, this often, so that a GPU that comes back (a driver reset) serves again by itself.
constexpr auto kGivenUpRetry = std::chrono::seconds(60);

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

absl::Status DeviceWorker::Submit(Job job, const std::string& owner, Refused refused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError(absl::StrCat("device ", name(), " is shutting down"));
    }
    if (queued_.load() >= capacity_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue of device ", name(), " is full (", capacity_, " jobs waiting)"));
    }
    // Before anything is queued: an owner at its limit costs no device time at all.
    if (owner_limit_ != nullptr) {
      if (absl::Status s = owner_limit_->Acquire(owner); !s.ok()) return s;
    }
    std::deque<Entry>& mine = queues_[owner];
    if (mine.empty()) turns_.push_back(owner);
    mine.push_back({std::move(job), std::chrono::steady_clock::now(), owner, std::move(refused)});
    queued_.store(queued_.load() + 1, std::memory_order_release);
    // Reported under the lock so that a late report cannot overwrite a newer depth.
    if (on_depth_) on_depth_(queued_.load());
  }
  cv_.notify_one();
  return absl::OkStatus();
}

DeviceWorker::Entry DeviceWorker::TakeNextLocked() {
  const std::string owner = std::move(turns_.front());
  turns_.pop_front();
  auto it = queues_.find(owner);
  Entry entry = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) {
    queues_.erase(it);
  } else {
    turns_.push_back(owner);  // its next job waits for every other owner's turn
  }
  queued_.store(queued_.load() - 1, std::memory_order_release);
  if (owner_limit_ != nullptr) owner_limit_->Release(owner);
  return entry;
}

std::string DeviceWorker::NotServingReason() const {
  if (gave_up_.load()) return "could not be rebuilt after a fault and is out of service";
  if (!warmed_.load()) return "is warming up";
  if (fault_reported_.load() || !backend_->Healthy()) return "is recovering from a fault";
  return "";
}

std::size_t DeviceWorker::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_.load() + (running_job_ ? 1 : 0);
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
  gave_up_.store(!backend_->Healthy());
  gave_up_at_ = std::chrono::steady_clock::now();
  if (!gave_up_.load()) {
    warmed_.store(true);  // a device whose warm-up failed serves once rebuilt
    fault_reported_.store(false);
    if (on_health_) on_health_(true);
  } else {
    LogError(absl::StrCat(name(),
                          " could not be rebuilt; it is out of service (the other devices keep "
                          "serving; liveness turns NOT_SERVING once every device is)"));
    if (on_failed_) on_failed_();
  }
}

void DeviceWorker::Loop(std::function<void(const absl::Status&)> on_warm) {
  const absl::Status warm = backend_->WarmUp();
  warmed_.store(warm.ok());
  if (on_warm) on_warm(warm);
  auto free_since = std::chrono::steady_clock::now();  // the previous job's end
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Idle, the device is still watched: a device host that died between jobs is replaced
      // now rather than failing the next request.
      while (
          !cv_.wait_for(lock, kIdleHealthCheck, [this] { return stopping_ || !turns_.empty(); })) {
        lock.unlock();
        if (!backend_->Healthy() &&
            (!gave_up_.load() || std::chrono::steady_clock::now() - gave_up_at_ >= kGivenUpRetry)) {
          RecoverDevice();
        }
        lock.lock();
      }
      // Drain: accepted work runs even while stopping.
      if (turns_.empty()) return;
      entry = TakeNextLocked();
      if (on_depth_) on_depth_(queued_.load());
      running_job_ = true;
      const auto now = std::chrono::steady_clock::now();
      handoff_seconds_ =
          std::chrono::duration<double>(now - std::max(entry.enqueued, free_since)).count();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - entry.enqueued).count();
    RunOrRefuse(entry, waited);
    if (!backend_->Healthy()) RecoverDevice();
    free_since = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_job_ = false;
    }
    SpinForNextJob();
  }
}

void DeviceWorker::RunOrRefuse(Entry& entry, double waited) {
  if (owner_limit_ == nullptr) return entry.job(*backend_, waited);
  // The budget is checked again now, with the owner's running jobs counted: the check at
  // Submit let every job queued before the first one's charge through.
  absl::StatusOr<OwnerJobLimit::Running> running = owner_limit_->Start(entry.owner);
  if (!running.ok()) {
    if (entry.refused) entry.refused(running.status());
    return;
  }
  entry.job(*backend_, waited);
  // The owner's device-seconds: the time the job held this worker.
  owner_limit_->Finish(*running);
}

void DeviceWorker::SpinForNextJob() const {
  if (idle_spin_.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + idle_spin_;
  while (queued_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace kerneleval::server
