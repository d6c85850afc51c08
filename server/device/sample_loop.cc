#include "server/device/sample_loop.h"

#include <chrono>
#include <cmath>

namespace kerneleval::server {

absl::StatusOr<Measurement> CollectSamples(
    const MeasureOptions& options, const std::function<absl::StatusOr<double>()>& timed_call) {
  Measurement m;
  auto stop_requested = [&] { return options.should_stop && options.should_stop(); };
  for (std::uint32_t i = 0; i < options.warmup; ++i) {
    if (stop_requested()) {
      m.stopped_early = true;
      return m;
    }
    absl::StatusOr<double> t = timed_call();
    if (!t.ok()) return t.status();
  }

  const AdaptiveOptions& a = options.adaptive;
  const std::uint32_t limit = a.enabled ? a.max_samples : options.repetitions;
  const auto start = std::chrono::steady_clock::now();
  // Welford's running mean and variance: the stopping rule is checked after every sample.
  double mean = 0, m2 = 0;
  while (m.samples_seconds.size() < limit) {
    if (stop_requested()) {
      m.stopped_early = true;
      break;
    }
    absl::StatusOr<double> t = timed_call();
    if (!t.ok()) return t.status();
    m.samples_seconds.push_back(*t);
    const double n = static_cast<double>(m.samples_seconds.size());
    const double delta = *t - mean;
    mean += delta / n;
    m2 += delta * (*t - mean);
    if (!a.enabled) continue;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= a.max_seconds) break;
    if (m.samples_seconds.size() >= a.min_samples && n > 1 && mean > 0) {
      const double spread = std::sqrt(m2 / (n - 1)) / mean;
      if (spread <= a.target_relative_spread) break;
    }
  }
  return m;
}

}  // namespace kerneleval::server
