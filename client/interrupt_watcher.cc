#include "client/interrupt_watcher.h"

#include <chrono>

namespace kerneleval::client {
namespace {

// Lock-free, hence async-signal-safe.
std::atomic<bool> g_interrupted{false};

extern "C" void OnSigint(int) { g_interrupted.store(true); }

}  // namespace

InterruptWatcher::InterruptWatcher(std::function<void()> on_interrupt)
    : on_interrupt_(std::move(on_interrupt)) {
  g_interrupted.store(false);
  struct sigaction action {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_);
  thread_ = std::thread([this] {
    // 50 ms: quick enough for a person, idle enough for a long bench.
    while (!stop_.load()) {
      if (g_interrupted.load()) {
        on_interrupt_();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

InterruptWatcher::~InterruptWatcher() {
  stop_.store(true);
  thread_.join();
  sigaction(SIGINT, &previous_, nullptr);
}

bool InterruptWatcher::interrupted() const { return g_interrupted.load(); }

}  // namespace kerneleval::client
