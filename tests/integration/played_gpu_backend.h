// A device that runs on the CPU and plays a GPU, for tests of what the server does when a GPU
// misbehaves: a context that never warms up, a fault that breaks it, a rebuild that fails, a
// submission that leaks another tenant's data. The CPU can do none of these; a test's subclass
// plays them by overriding a call or two, and every other call goes to a real CpuBackend. The
// server under test, its workers and its health reporting are the real ones.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "server/device/backend.h"
#include "server/device/cpu_backend.h"

namespace kerneleval::testing {

// A one-shot flag one thread opens and another waits for (bounded, so that a broken server
// fails the test instead of hanging it).
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool Wait(std::chrono::seconds limit = std::chrono::seconds(120)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class PlayedGpu : public server::Backend {
 public:
  explicit PlayedGpu(const std::string& name = "cpu") : cpu_(name) {}

  const std::string& name() const override { return cpu_.name(); }
  v1::Device Describe() const override { return cpu_.Describe(); }
  std::vector<v1::Implementation> Implementations() const override {
    return cpu_.Implementations();
  }
  absl::Status WarmUp() override { return cpu_.WarmUp(); }
  absl::StatusOr<server::Measurement> Measure(const server::Problem& p,
                                              const server::HostInputs& in,
                                              const server::HostOutputs& out,
                                              const std::string& impl,
                                              const server::MeasureOptions& o) override {
    return cpu_.Measure(p, in, out, impl, o);
  }
  double MeasuredCopyBandwidth() const override { return cpu_.MeasuredCopyBandwidth(); }
  v1::Clocks ReadClocks(bool* available) override { return cpu_.ReadClocks(available); }
  bool Healthy() const override { return healthy_.load(); }

 protected:
  server::CpuBackend& cpu() { return cpu_; }
  const server::CpuBackend& cpu() const { return cpu_; }

  // The CPU's implementations and `extra` (on device kind "cpu"), the name a test asks for to
  // play a failure with.
  std::vector<v1::Implementation> CpuImplementationsAnd(const std::string& extra,
                                                        bool test_only) const {
    std::vector<v1::Implementation> impls = cpu_.Implementations();
    v1::Implementation& added = impls.emplace_back();
    added.set_name(extra);
    added.set_device_kind("cpu");
    added.set_test_only(test_only);
    return impls;
  }

  // A context fault, as a GPU has one: unhealthy until Repaired(), reported to the device's
  // worker at once; returns what the call that hit it answers.
  absl::Status Fault() {
    healthy_.store(false);
    ReportFault();
    return absl::InternalError("cudaErrorIllegalAddress (simulated)");
  }
  void Repaired() { healthy_.store(true); }

 private:
  server::CpuBackend cpu_;
  std::atomic<bool> healthy_{true};
};

}  // namespace kerneleval::testing
