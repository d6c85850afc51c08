// Ctrl-C for a long call: while an InterruptWatcher lives, SIGINT only sets a flag (the one
// thing a signal handler may safely do), and a watcher thread turns the flag into a call of
// `on_interrupt` on an ordinary thread, where cancelling a gRPC call is allowed. The
// previous SIGINT disposition comes back when the watcher dies. One watcher at a time.
#pragma once

#include <atomic>
#include <csignal>
#include <functional>
#include <thread>

namespace kerneleval::client {

class InterruptWatcher {
 public:
  explicit InterruptWatcher(std::function<void()> on_interrupt);
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  bool interrupted() const;

 private:
  std::function<void()> on_interrupt_;
  struct sigaction previous_ {};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kerneleval::client
