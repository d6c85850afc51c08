#include "server/evaluation/measurement_checks.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/enum_names.h"
#include "common/protocol.h"
#include "server/figures/kernel_profile.h"

namespace kerneleval::server {
namespace {

constexpr double kTrafficTolerance = 0.95;

// "66.58 MB", "8.19 kB": per-call traffic spans a row of a B = 1 call to 33 M elements.
std::string Mb(double bytes) {
  return bytes >= 1e6 ? absl::StrFormat("%.2f MB", bytes / 1e6)
                      : absl::StrFormat("%.2f kB", bytes / 1e3);
}
std::string Us(double seconds) { return absl::StrFormat("%.3f us", seconds * 1e6); }

}  // namespace

DeclaredBytes DeclaredReadWrite(const Problem& p) {
  const std::uint64_t rows = p.TensorBytes();
  DeclaredBytes d;
  // OUTPUT reads hidden_states, residual, weight and writes output; the other modes also
  // write residual_out (in place: over residual).
  d.write = WritesResidual(p.mode) ? 2 * rows : rows;
  d.read = 2 * rows + p.WeightBytes();
  return d;
}

std::string MeasuredAs(v1::Timer timer, const MeasureOptions& options) {
  return MeasuredAsName(timer, options.cold ? v1::CACHE_MODE_COLD : v1::CACHE_MODE_HOT,
                        options.graph, std::max(1u, options.graph_calls), options.rotate_inputs);
}

IntegrityFindings AnnotateMeasurement(const Measurement& m, const Problem& problem,
                                      const v1::Device& device, const MeasureOptions& options,
                                      double median_seconds, v1::WorkloadResult* result,
                                      v1::Environment* env) {
  IntegrityFindings findings;
  // Whether every call starts with nothing of its data in L2: cold, and not a graph replay
  // of several calls, where the flush comes before the replay and only its first call finds
  // L2 empty (an honest kernel replayed 10 times reads a tenth of its bytes per call).
  const bool each_call_cold = options.cold && (!options.graph || options.graph_calls <= 1);
  result->set_measured_as(MeasuredAs(m.timer, options));
  // Checked calls had device work between them (call_checks.h): a number to compare only
  // with numbers measured the same way.
  if (m.calls_checked > 0) result->mutable_measured_as()->append(", calls checked");
  *result->mutable_clocks() = m.clocks;
  *result->mutable_admission() = m.admission;
  const bool throttled = (m.clocks.throttle_reasons() & ~kNonThrottlingReasons) != 0;
  result->set_throttled(throttled);
  if (throttled) {
    findings.notes.push_back(absl::StrCat(
        "clocks held back while timing (", absl::StrJoin(m.clocks.throttle_reason_names(), ", "),
        "): SM clock ", m.clocks.sm_mhz_min(), "-", m.clocks.sm_mhz_max(), " MHz"));
  }
  MergeClockSummary(m.clocks, env->mutable_clocks_during());

  const DeclaredBytes declared = DeclaredReadWrite(problem);
  const std::uint64_t l2 = device.l2_cache_bytes();
  if (options.profile) {
    // A profile informs; it never judges: its counters were taken outside the timed windows,
    // replaying the call, and a kernel may tell the replays apart.
    v1::ProfileReport& profile = *result->mutable_profile();
    profile = m.profile;
    if (!profile.available() && profile.unavailable_reason().empty()) {
      profile.set_unavailable_reason("profile unavailable: this device has no hardware counters");
    }
    DeriveProfile(declared.read, declared.write, &profile);
  }
  if (options.measure_dram_bytes) {
    v1::DramTraffic& d = *result->mutable_dram();
    d = m.dram;
    if (!d.available() && d.unavailable_reason().empty()) {
      d.set_unavailable_reason("counters unavailable on this device (no DRAM counters here)");
    }
    d.set_declared_read_bytes(declared.read);
    d.set_declared_write_bytes(declared.write);
    if (d.available() && median_seconds > 0) {
      d.set_bytes_per_second((d.read_bytes() + d.write_bytes()) / median_seconds);
    }
    // The work floor, in every protocol: the L1 caches start empty at each kernel launch, so
    // every byte a correct call reads reaches it from L2 at least once, and every byte it
    // writes passes through L2, hot or cold. A kernel that probes a few bytes of each row
    // and keeps an answer it found falls far below.
    if (d.available() && d.l2_available()) {
      if (d.l2_read_bytes() < kTrafficTolerance * static_cast<double>(declared.read)) {
        findings.too_good.push_back(absl::StrCat("L2 reads ", Mb(d.l2_read_bytes()),
                                                 " per call, below the ", Mb(declared.read),
                                                 " every correct call must read"));
      }
      if (d.l2_write_bytes() < kTrafficTolerance * static_cast<double>(declared.write)) {
        findings.too_good.push_back(absl::StrCat("L2 writes ", Mb(d.l2_write_bytes()),
                                                 " per call, below the ", Mb(declared.write),
                                                 " every correct call must write"));
      }
    }
    if (d.available() && each_call_cold) {
      if (d.read_bytes() < kTrafficTolerance * static_cast<double>(declared.read)) {
        findings.too_good.push_back(absl::StrCat("DRAM reads ", Mb(d.read_bytes()),
                                                 " per call, below the ", Mb(declared.read),
                                                 " the definition must read"));
      }
      const double must_write = static_cast<double>(declared.write) - static_cast<double>(l2);
      if (must_write > 0 && d.write_bytes() < kTrafficTolerance * must_write) {
        findings.too_good.push_back(absl::StrCat(
            "DRAM writes ", Mb(d.write_bytes()), " per call, below the ", Mb(must_write),
            " the definition must write even with the whole L2 (", Mb(l2), ") left dirty"));
      }
    }
  }

  // Cold, the flush after each call writes back what the call left dirty in L2, outside its
  // time: up to the L2 size of the writes need not reach DRAM before the call ends (the
  // fused kernel on an H100 at B = 12383: 152 MB declared, 3.43 TB/s against a 3.35 TB/s
  // attribute peak). Hot calls back to back pay for the previous call's write-backs, so
  // there every byte counts.
  const double writes_in_time =
      each_call_cold ? std::max(0.0, static_cast<double>(declared.write) - static_cast<double>(l2))
                     : static_cast<double>(declared.write);
  const double bytes = static_cast<double>(declared.read) + writes_in_time;
  const double peak = device.peak_bytes_per_second();
  const double working_set = static_cast<double>(declared.read + declared.write);
  if (peak > 0 && median_seconds > 0 && (each_call_cold || working_set > static_cast<double>(l2))) {
    const double floor = bytes / peak;
    if (median_seconds < floor) {
      findings.too_good.push_back(absl::StrCat("median ", Us(median_seconds),
                                               " is below the analytic floor ", Us(floor),
                                               " (declared bytes / attribute peak)"));
    }
  }
  // The reader sees every flag, the notes first; the verdict reads the kinds.
  for (const std::vector<std::string>* kind : {&findings.notes, &findings.too_good}) {
    for (const std::string& flag : *kind) result->add_integrity_flags(flag);
  }
  return findings;
}

void MergeClockSummary(const v1::ClockSummary& part, v1::ClockSummary* total) {
  if (part.samples() == 0) return;
  if (total->samples() == 0) {
    *total = part;
    return;
  }
  const double n = total->samples(), k = part.samples();
  total->set_sm_mhz_mean((total->sm_mhz_mean() * n + part.sm_mhz_mean() * k) / (n + k));
  total->set_samples(total->samples() + part.samples());
  total->set_sm_mhz_min(std::min(total->sm_mhz_min(), part.sm_mhz_min()));
  total->set_sm_mhz_max(std::max(total->sm_mhz_max(), part.sm_mhz_max()));
  total->set_memory_mhz_min(std::min(total->memory_mhz_min(), part.memory_mhz_min()));
  total->set_memory_mhz_max(std::max(total->memory_mhz_max(), part.memory_mhz_max()));
  total->set_throttle_reasons(total->throttle_reasons() | part.throttle_reasons());
  for (const std::string& name : part.throttle_reason_names()) {
    const auto& names = total->throttle_reason_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      total->add_throttle_reason_names(name);
    }
  }
  total->set_temperature_c_max(std::max(total->temperature_c_max(), part.temperature_c_max()));
  total->set_power_watts_max(std::max(total->power_watts_max(), part.power_watts_max()));
}

}  // namespace kerneleval::server
