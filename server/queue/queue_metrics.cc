#include "server/queue/queue_metrics.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/enum_names.h"
#include "server/queue/runs_on.h"

namespace kerneleval::server {
namespace {

// Seconds a verdict waits: from at once to an hour behind a busy fleet.
const prometheus::Histogram::BucketBoundaries kClaimWaitBuckets = {
    0.1, 0.5, 1, 2.5, 5, 15, 30, 60, 120, 300, 900, 1800, 3600};

constexpr v1::JobPriority kPriorities[] = {v1::JOB_PRIORITY_WAITED_FOR, v1::JOB_PRIORITY_SCHEDULED,
                                           v1::JOB_PRIORITY_REPRODUCTION};

// As the CLI's --priority and every format spell them (common/enum_names.h).
std::string PriorityLabel(v1::JobPriority priority) {
  return EnumShortName(*v1::JobPriority_descriptor(), priority);
}

}  // namespace

QueueMetrics::QueueMetrics(prometheus::Registry& registry, const std::vector<std::string>& kinds)
    : queued_(prometheus::BuildGauge()
                  .Name("kerneleval_jobs_queued")
                  .Help("Queued Benchmark jobs of the fleet (every server sharing the results "
                        "database exports the same figure), by device kind and priority class")
                  .Register(registry)),
      oldest_(prometheus::BuildGauge()
                  .Name("kerneleval_jobs_oldest_queued_seconds")
                  .Help("Seconds the oldest queued job of a device kind and class has waited (0: "
                        "none queued)")
                  .Register(registry)),
      running_(prometheus::BuildGauge()
                   .Name("kerneleval_jobs_running")
                   .Help("Queued jobs this server runs now")
                   .Register(registry)
                   .Add({})),
      claim_wait_(prometheus::BuildHistogram()
                      .Name("kerneleval_job_claim_wait_seconds")
                      .Help("Seconds from enqueue to this server's claim, by device kind")
                      .Register(registry)),
      expiries_(prometheus::BuildCounter()
                    .Name("kerneleval_job_lease_expiries_total")
                    .Help("Claimed jobs whose lease ran out (their server stopped renewing it), "
                          "counted by the server that re-queued them: requeued, or failed out "
                          "of attempts")
                    .Register(registry)),
      ended_(prometheus::BuildCounter()
                 .Name("kerneleval_jobs_ended_total")
                 .Help("Queued jobs this server ended, by outcome (done, failed, cancelled, "
                       "released at shutdown, lost with its lease)")
                 .Register(registry)) {
  for (const std::string& kind : kinds) {
    kinds_[kind] = true;
    claim_wait_.Add({{"device_kind", kind}}, kClaimWaitBuckets);
  }
  for (const char* outcome : {"requeued", "failed"}) expiries_.Add({{"outcome", outcome}});
  for (const char* outcome : {"done", "failed", "cancelled", "released", "lost"}) {
    ended_.Add({{"outcome", outcome}});
  }
  SetDepth({}, 0);
}

void QueueMetrics::SetDepth(const std::vector<store::JobQueue::Depth>& depth, std::int64_t now_us) {
  // One series per kind and architecture: jobs pinned to a node count under their kind.
  struct Queued {
    double count = 0;
    std::int64_t oldest_enqueued_at_us = 0;
  };
  std::map<std::pair<std::string, v1::JobPriority>, Queued> by_label;
  for (const store::JobQueue::Depth& d : depth) {
    const std::string kind = KindLabel(d.device_kind);
    kinds_[kind] = true;
    Queued& q = by_label[{kind, d.priority}];
    if (q.count == 0 || d.oldest_enqueued_at_us < q.oldest_enqueued_at_us) {
      q.oldest_enqueued_at_us = d.oldest_enqueued_at_us;
    }
    q.count += static_cast<double>(d.queued);
  }
  for (const auto& [kind, unused] : kinds_) {
    for (v1::JobPriority priority : kPriorities) {
      const prometheus::Labels labels = {{"device_kind", kind},
                                         {"priority", PriorityLabel(priority)}};
      double queued = 0, oldest = 0;
      if (const auto q = by_label.find({kind, priority}); q != by_label.end()) {
        queued = q->second.count;
        oldest = std::max(0.0, static_cast<double>(now_us - q->second.oldest_enqueued_at_us) / 1e6);
      }
      queued_.Add(labels).Set(queued);
      oldest_.Add(labels).Set(oldest);
    }
  }
}

void QueueMetrics::SetRunning(std::size_t running) { running_.Set(static_cast<double>(running)); }

void QueueMetrics::ObserveClaim(const std::string& kind, double waited_seconds) {
  claim_wait_.Add({{"device_kind", kind}}, kClaimWaitBuckets).Observe(waited_seconds);
}

void QueueMetrics::AddExpired(const store::JobQueue::Expired& expired) {
  expiries_.Add({{"outcome", "requeued"}}).Increment(static_cast<double>(expired.requeued));
  expiries_.Add({{"outcome", "failed"}}).Increment(static_cast<double>(expired.failed));
}

void QueueMetrics::Ended(const std::string& outcome) {
  ended_.Add({{"outcome", outcome}}).Increment();
}

}  // namespace kerneleval::server
