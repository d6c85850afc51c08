#include "server/cuda/clock_admission.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/device/nvml.h"

namespace kerneleval::server {
namespace {

constexpr unsigned kSettledMhz = 15;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

unsigned SmMhz(const std::string& uuid) {
  v1::Clocks c;
  return Nvml::Get().ReadClocks(uuid, &c) ? c.sm_mhz() : 0;
}

}  // namespace

absl::Status AdmitClocks(const std::string& uuid, const std::function<absl::Status()>& busy,
                         const AdmissionLimits& limits, v1::ClockAdmission* out) {
  const Nvml& nvml = Nvml::Get();
  if (!nvml.Available() || uuid.empty()) {
    out->set_checked(false);
    out->set_note("no NVML: clocks not checked before timing");
    return absl::OkStatus();
  }
  out->set_checked(true);

  // Idle: nobody else's kernels share the device while ours are timed.
  const auto idle_start = std::chrono::steady_clock::now();
  int others = nvml.OtherComputeProcesses(uuid);
  while (others > 0 && SecondsSince(idle_start) < limits.max_idle_wait_seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    others = nvml.OtherComputeProcesses(uuid);
  }
  out->set_idle_wait_seconds(SecondsSince(idle_start));
  out->set_other_processes(others > 0 ? static_cast<std::uint32_t>(others) : 0);
  if (others < 0) out->set_note("NVML cannot list the GPU's processes: idle not checked");
  if (others > 0) {
    out->set_note(absl::StrCat(others, " other process(es) still on the GPU after ",
                               limits.max_idle_wait_seconds, " s"));
  }

  // Settle: keep the device busy until the clock stops rising.
  const unsigned max_mhz = nvml.MaxSmClockMhz(uuid);
  out->set_sm_mhz_max(max_mhz);
  out->set_sm_mhz_before(SmMhz(uuid));
  const auto settle_start = std::chrono::steady_clock::now();
  unsigned previous = 0;
  int unchanged = 0;
  bool settled = false;
  unsigned now = 0;
  while (!settled) {
    if (absl::Status s = busy(); !s.ok()) return s;
    now = SmMhz(uuid);
    if (max_mhz > 0 && now + kSettledMhz >= max_mhz) {
      settled = true;
    } else if (previous > 0 &&
               static_cast<unsigned>(
                   std::abs(static_cast<int>(now) - static_cast<int>(previous))) <= kSettledMhz) {
      settled = ++unchanged >= 2;
    } else {
      unchanged = 0;
    }
    previous = now;
    if (SecondsSince(settle_start) >= limits.max_settle_seconds) break;
  }
  out->set_settle_seconds(SecondsSince(settle_start));
  out->set_settled(settled);
  out->set_sm_mhz_after(now);
  return absl::OkStatus();
}

}  // namespace kerneleval::server
