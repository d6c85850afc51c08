// This server's part of the fleet's verdict queue (server/store/job_queue.h): it claims queued
// jobs of the kinds of device it has while it has room, runs each through the Benchmark path
// (server/core/benchmark_call.h) exactly as a streamed Benchmark runs, renews the leases of
// those it runs, and re-queues jobs whose server stopped renewing theirs.
//
// A job's results are stored in the transaction that marks it done, fenced by this server's
// lease: a server that lost its lease (it stalled, and another server took the job over)
// stores nothing. A job its owner cancels stops at the next heartbeat; what finished before is
// stored, the job CANCELLED. Stop() (SIGTERM, a drain) stops claiming and gives every running
// job back to the queue at once, not counted as an attempt.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "prometheus/registry.h"
#include "server/core/service_state.h"
#include "server/queue/queue_metrics.h"
#include "server/store/job_queue.h"

namespace kerneleval::server {

struct QueueOptions {
  // Jobs this server runs at once: -1, one per device; 0, it claims none (it still takes
  // Enqueue, Watch, Cancel and List).
  int workers = -1;
  double lease_seconds = 30;  // renewed every third of it
  double poll_seconds = 1;    // how often the queue is read for other servers' jobs
  int max_attempts = 3;       // claims of one job before a lease that runs out fails it
  int max_queued_per_owner = 1000;
  std::string worker_name;  // unique per process: node name, pid and a random part
  std::string node_name;    // --node-name: jobs pinned to it (runs_on "...@NODE") are claimed
  // --queue-benchmarks: Benchmark calls become jobs of the queue, followed from the server the
  // client reached (server/queue/queued_benchmark.h).
  bool benchmarks = false;
};

class QueueRunner {
 public:
  // `state` and `queue` must outlive the runner; `registry` (may be null) gets its metrics.
  QueueRunner(ServiceState& state, store::JobQueue& queue, QueueOptions options,
              prometheus::Registry* registry = nullptr);
  ~QueueRunner();  // Stop()

  const QueueOptions& options() const { return options_; }
  // A job was just enqueued through this server: look now rather than at the next poll.
  void Wake();
  // Stops claiming and releases every running job to the queue; returns when the loop ended.
  void Stop();

 private:
  struct Running;
  void Loop();
  void Tick();
  void StartJob(store::QueuedJob job);
  // Reads once, when every device is first warm, what they are: each worker's GPU
  // architecture ("sm_90", "" for none) and the job kinds this server claims (runs_on.h: its
  // device kinds and architectures, each also pinned to its node). Loop thread only.
  void ReadDevicesOnce();
  void Heartbeats(std::int64_t now_us);
  // Charges `job`'s owner the device time since its last charge (the claim order's fairness).
  void ChargeOwner(Running& job, std::int64_t now_us);
  // The job left this server: `outcome` as QueueMetrics::Ended counts it.
  void Ended(const std::string& run_id, const std::string& outcome);
  void RefreshDepth(std::int64_t now_us);
  void CancelCall(Running& job);

  ServiceState& state_;
  store::JobQueue& queue_;
  const QueueOptions options_;
  int capacity_ = 0;
  std::vector<std::string> device_archs_;  // by worker index (ReadDevicesOnce)
  std::vector<std::string> claim_kinds_;   // empty until ReadDevicesOnce
  std::unique_ptr<QueueMetrics> metrics_;  // null without a registry
  std::int64_t depth_read_us_ = 0;         // when the queue's depth was last read (Tick only)

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::map<std::string, std::shared_ptr<Running>> running_;  // by run id
  std::thread loop_;
};

// "node:pid:random", so that two servers of one node never share a lease.
std::string QueueWorkerName(const std::string& node_name);

}  // namespace kerneleval::server
