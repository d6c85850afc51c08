// NVML clocks sampled on a thread of their own while a measurement runs, so that every
// result says what the SM and memory clocks were while its samples were taken, and whether
// the GPU was held back (power, thermal) meanwhile.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

class ClockSampler {
 public:
  // Reads at once, then every `period_ms` until Stop() (period 0: at start and stop only,
  // no thread). Does nothing where NVML does not know the GPU (0 samples then).
  ClockSampler(std::string uuid, int period_ms = 10);
  ~ClockSampler() { Stop(); }
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  // Takes a last reading, stops the thread and summarizes; idempotent.
  v1::ClockSummary Stop();

 private:
  void ReadOnce();

  const std::string uuid_;
  const int period_ms_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<v1::Clocks> readings_;
  std::thread thread_;
  bool stopped_ = false;
  v1::ClockSummary summary_;
};

// The sampling period: DeviceSettings::clock_sample_ms (server/device/device_settings.h).
int ClockSamplePeriodMs();

}  // namespace kerneleval::server
