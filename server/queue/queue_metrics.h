// The verdict queue as Prometheus sees it (deploy/prometheus/rules/alerts.yml, group
// kerneleval-queue): the fleet's queued jobs and the age of the oldest, read from the shared
// table, so every server exports the same figures (rules take their max); and what this
// server did: claims and how long each job waited, leases it found run out, jobs it ended.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/store/job_queue.h"

namespace kerneleval::server {

class QueueMetrics {
 public:
  // `kinds`: the device kinds this server claims; their series exist (at 0) from the start.
  QueueMetrics(prometheus::Registry& registry, const std::vector<std::string>& kinds);

  // The fleet's queue now: every kind and class seen, absent ones at 0.
  void SetDepth(const std::vector<store::JobQueue::Depth>& depth, std::int64_t now_us);
  void SetRunning(std::size_t running);
  // A claim by this server of a job enqueued `waited_seconds` before.
  void ObserveClaim(const std::string& kind, double waited_seconds);
  // What one pass of re-queueing expired leases did (on the server that applied it).
  void AddExpired(const store::JobQueue::Expired& expired);
  // A job this server ended: "done", "failed", "cancelled", "released" (given back at
  // shutdown) or "lost" (its lease ran out under this server).
  void Ended(const std::string& outcome);

 private:
  prometheus::Family<prometheus::Gauge>& queued_;
  prometheus::Family<prometheus::Gauge>& oldest_;
  prometheus::Gauge& running_;
  prometheus::Family<prometheus::Histogram>& claim_wait_;
  prometheus::Family<prometheus::Counter>& expiries_;
  prometheus::Family<prometheus::Counter>& ended_;
  std::map<std::string, bool> kinds_;  // every kind with series
};

}  // namespace kerneleval::server
