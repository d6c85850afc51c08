#include "server/submissions/compile_queue.h"

namespace kerneleval::server::submissions {

void CompileQueue::Push(const std::string& owner, Job job) {
  owners_[owner].waiting.push_back(std::move(job));
  ++waiting_;
}

std::size_t CompileQueue::active(const std::string& owner) const {
  auto it = owners_.find(owner);
  return it == owners_.end() ? 0 : it->second.waiting.size() + it->second.running;
}

std::pair<std::string, CompileQueue::Job> CompileQueue::Pop() {
  // A handful of owners at most wait at once (each is bounded by --max-compiles-per-owner
  // and all by --compile-queue): a scan is cheaper than keeping an order.
  auto next = owners_.end();
  for (auto it = owners_.begin(); it != owners_.end(); ++it) {
    if (it->second.waiting.empty()) continue;
    if (next == owners_.end() || it->second.last_served < next->second.last_served) next = it;
  }
  Owner& o = next->second;
  Job job = std::move(o.waiting.front());
  o.waiting.pop_front();
  --waiting_;
  ++o.running;
  o.last_served = ++served_;
  return {next->first, std::move(job)};
}

void CompileQueue::Finished(const std::string& owner) {
  auto it = owners_.find(owner);
  if (it == owners_.end() || it->second.running == 0) return;
  --it->second.running;
  ForgetIfIdle(it);
}

void CompileQueue::ForgetIfIdle(std::map<std::string, Owner>::iterator it) {
  // Kept while anything of the owner is waiting or running, so that an owner cannot jump the
  // order by queueing its next compile the moment its last one is taken.
  if (it->second.waiting.empty() && it->second.running == 0) owners_.erase(it);
}

}  // namespace kerneleval::server::submissions
