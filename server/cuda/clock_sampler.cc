#include "server/cuda/clock_sampler.h"

#include <algorithm>
#include <chrono>

#include "server/device/device_settings.h"
#include "server/device/nvml.h"

namespace kerneleval::server {
namespace {

void SetReasonNames(std::uint64_t mask, v1::ClockSummary* s) {
  v1::Clocks named;
  ThrottleReasonNames(mask, &named);
  s->clear_throttle_reason_names();
  for (const std::string& n : named.throttle_reason_names()) s->add_throttle_reason_names(n);
}

}  // namespace

ClockSampler::ClockSampler(std::string uuid, int period_ms)
    : uuid_(std::move(uuid)), period_ms_(period_ms) {
  if (!Nvml::Get().Available() || uuid_.empty()) return;
  ReadOnce();
  if (period_ms_ <= 0) return;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
      if (!stop_.load()) ReadOnce();
    }
  });
}

void ClockSampler::ReadOnce() {
  v1::Clocks c;
  if (!Nvml::Get().ReadClocks(uuid_, &c)) return;
  std::lock_guard<std::mutex> lock(mu_);
  readings_.push_back(std::move(c));
}

v1::ClockSummary ClockSampler::Stop() {
  if (stopped_) return summary_;
  stopped_ = true;
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (Nvml::Get().Available() && !uuid_.empty()) ReadOnce();
  std::lock_guard<std::mutex> lock(mu_);
  v1::ClockSummary& s = summary_;
  if (readings_.empty()) return s;
  double sum = 0;
  std::uint32_t sm_min = readings_.front().sm_mhz(), sm_max = sm_min;
  std::uint32_t mem_min = readings_.front().memory_mhz(), mem_max = mem_min;
  std::uint64_t mask = 0;
  std::uint32_t temp = 0;
  double power = 0;
  for (const v1::Clocks& c : readings_) {
    sum += c.sm_mhz();
    sm_min = std::min(sm_min, c.sm_mhz());
    sm_max = std::max(sm_max, c.sm_mhz());
    mem_min = std::min(mem_min, c.memory_mhz());
    mem_max = std::max(mem_max, c.memory_mhz());
    mask |= c.throttle_reasons();
    temp = std::max(temp, c.temperature_c());
    power = std::max(power, c.power_watts());
  }
  s.set_samples(static_cast<std::uint32_t>(readings_.size()));
  s.set_sm_mhz_min(sm_min);
  s.set_sm_mhz_mean(sum / static_cast<double>(readings_.size()));
  s.set_sm_mhz_max(sm_max);
  s.set_memory_mhz_min(mem_min);
  s.set_memory_mhz_max(mem_max);
  s.set_throttle_reasons(mask);
  SetReasonNames(mask, &s);
  s.set_temperature_c_max(temp);
  s.set_power_watts_max(power);
  return s;
}

int ClockSamplePeriodMs() { return CurrentDeviceSettings().clock_sample_ms; }

}  // namespace kerneleval::server
