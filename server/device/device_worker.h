// One worker thread per device, owning its backend, with a bounded queue. Jobs run one at a
// time, so a benchmark job holds its device exclusively and timings are not disturbed by
// other traffic. Jobs carry their owner and the worker takes them round-robin between
// owners (FIFO within one owner), so that one owner's flood cannot starve another's job.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/device/backend.h"
#include "server/device/owner_job_limit.h"

namespace kerneleval::server {

// A short idle spin where the machine has cores to spare (8 or more), none on smaller ones:
// there a spinning worker takes the core the request's own threads need
// (docs/results/rpc-overhead.md).
std::chrono::microseconds DefaultWorkerIdleSpin();

class DeviceWorker {
 public:
  // A job receives the backend and the seconds it waited in the queue.
  using Job = std::function<void(Backend& backend, double queue_seconds)>;
  // Called with the new queue depth whenever it changes (for metrics).
  using DepthObserver = std::function<void(std::size_t depth)>;
  // Called from the worker thread when the device turns unhealthy (false) and when it has
  // recovered (true).
  using HealthObserver = std::function<void(bool healthy)>;

  DeviceWorker(std::unique_ptr<Backend> backend, std::size_t capacity,
               DepthObserver on_depth = nullptr, HealthObserver on_health = nullptr,
               std::function<void()> on_failed = nullptr);
  ~DeviceWorker();  // Stop()s: runs every accepted job, then joins.
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Starts the thread; the backend's WarmUp() runs on it first. `on_warm` is called from
  // the worker thread with WarmUp's result.
  void Start(std::function<void(const absl::Status&)> on_warm);

  // Called instead of the job, on the worker thread, when the job is refused as it would
  // start: its owner's device-seconds are spent, counting its running jobs (OwnerJobLimit).
  using Refused = std::function<void(const absl::Status& why)>;

  // RESOURCE_EXHAUSTED when the queue is full or `owner` is at its limit (set_owner_limit),
  // UNAVAILABLE once stopping. An accepted job either runs or, when its owner's budget is
  // spent by the time the worker takes it, gets `refused` (never both, never neither).
  absl::Status Submit(Job job, const std::string& owner, Refused refused);

  // Stops accepting, runs what was accepted, joins.
  void Stop();

  // How long the idle worker polls for a job before it sleeps on its condition variable:
  // a job submitted within it starts without a thread wake-up. Set before Start().
  void set_idle_spin(std::chrono::microseconds spin) { idle_spin_ = spin; }
  // Jobs per owner waiting, shared by every device of a server. Set before Start().
  void set_owner_limit(std::shared_ptr<OwnerJobLimit> limit) { owner_limit_ = std::move(limit); }

  // Takes new work: warmed up, not recovering from a fault, not given up on.
  bool serving() const {
    return warmed_.load() && !gave_up_.load() && !fault_reported_.load() && backend_->Healthy();
  }
  // Why the device takes no new work ("is warming up", ...); empty while serving().
  std::string NotServingReason() const;

  const Backend& backend() const { return *backend_; }
  const std::string& name() const { return backend_->name(); }
  std::size_t capacity() const { return capacity_; }
  // Queued plus running jobs: what a least-loaded choice compares.
  std::size_t load() const;
  // For the job now running (call it from the job): the part of its queue wait after the
  // device was free, i.e. the hand-off from the submitting thread to this worker.
  double handoff_seconds() const { return handoff_seconds_; }

 private:
  struct Entry {
    Job job;
    std::chrono::steady_clock::time_point enqueued;
    std::string owner;
    Refused refused;
  };
  // The next job: the front of the owner whose turn it is. Under mu_, queue not empty.
  Entry TakeNextLocked();
  void Loop(std::function<void(const absl::Status&)> on_warm);
  // Runs `entry` if its owner's budget lets it start (charging its time), else refuses it.
  void RunOrRefuse(Entry& entry, double waited);
  void RecoverDevice();
  // After a job: polls the queue for up to idle_spin_ before the worker sleeps.
  void SpinForNextJob() const;

  std::unique_ptr<Backend> backend_;
  const std::size_t capacity_;
  DepthObserver on_depth_;
  HealthObserver on_health_;
  std::function<void()> on_failed_;  // recovery gave up
  std::atomic<bool> fault_reported_{false};
  std::atomic<bool> warmed_{false};   // WarmUp (or a later rebuild) succeeded
  std::atomic<bool> gave_up_{false};  // recovery failed; retried after a job or a minute idle
  std::chrono::steady_clock::time_point gave_up_at_;  // worker thread only
  std::shared_ptr<OwnerJobLimit> owner_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<Entry>> queues_;  // by owner; no empty deques
  std::deque<std::string> turns_;       // owners with queued jobs, the next to run first
  std::atomic<std::size_t> queued_{0};  // jobs in queues_, also for the spinning worker
  std::chrono::microseconds idle_spin_{0};
  bool running_job_ = false;
  bool stopping_ = false;
  // Written when a job takes the device, under mu_, and read by that job only.
  double handoff_seconds_ = 0;
  std::thread thread_;
};

}  // namespace kerneleval::server
