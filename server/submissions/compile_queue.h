// The compiles waiting for a compile worker, taken fairly between owners: each free worker
// takes the oldest compile of the owner served least recently (an owner with none waiting or
// running is new again), FIFO within one owner. So an owner's honest compile waits for at
// most one compile of each owner ahead of it, and with every worker busy, for the first
// worker to come free: one compile's time limit (--compile-timeout-seconds) at worst, however
// many slow sources another owner queued. (FIFO once held an honest 0.2 s compile for 118 s
// behind another owner's exponential-macro sources.)
//
// Not thread-safe: the Submissions service holds its own lock around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace kerneleval::server::submissions {

class CompileQueue {
 public:
  using Job = std::function<void()>;

  void Push(const std::string& owner, Job job);
  bool empty() const { return waiting_ == 0; }
  std::size_t waiting() const { return waiting_; }
  // `owner`'s compiles waiting or running.
  std::size_t active(const std::string& owner) const;

  // The next compile and its owner (not empty()); it counts as running until Finished.
  std::pair<std::string, Job> Pop();
  void Finished(const std::string& owner);

 private:
  struct Owner {
    std::deque<Job> waiting;
    std::size_t running = 0;
    std::uint64_t last_served = 0;  // 0: not served since it became active
  };
  void ForgetIfIdle(std::map<std::string, Owner>::iterator it);

  std::map<std::string, Owner> owners_;  // the active ones only
  std::size_t waiting_ = 0;
  std::uint64_t served_ = 0;
};

}  // namespace kerneleval::server::submissions
