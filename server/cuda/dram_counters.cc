#include "server/cuda/dram_counters.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cuda/range_profiler.h"

namespace kerneleval::server {
namespace {

// DRAM bytes, then L2 sectors (32 bytes each, every source unit: SM loads and stores, TMA).
const std::vector<std::string> kDramMetrics = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
const std::vector<std::string> kAllMetrics = {"dram__bytes_read.sum", "dram__bytes_write.sum",
                                              "lts__t_sectors_op_read.sum",
                                              "lts__t_sectors_op_write.sum"};
constexpr double kSectorBytes = 32;

absl::StatusOr<std::vector<DramBytes>> Count(RangeProfiler& profiler, int device, int windows,
                                             const std::function<absl::Status()>& prepare,
                                             const std::function<absl::Status()>& window) {
  RETURN_IF_ERROR(profiler.Open(device));
  // DRAM and L2 together where they fit one pass; else DRAM alone (the L2 figures then
  // unavailable). More passes would need the window replayed, which a cold window cannot be.
  bool l2 = true;
  absl::StatusOr<int> passes = profiler.Configure(kAllMetrics, windows);
  if (!passes.ok() || *passes != 1) {
    l2 = false;
    passes = profiler.Configure(kDramMetrics, windows);
  }
  if (!passes.ok()) return passes.status();
  if (*passes != 1) {
    return absl::UnavailableError(
        absl::StrCat("counters unavailable on this machine: DRAM counters need ", *passes,
                     " passes on ", profiler.chip()));
  }
  RETURN_IF_ERROR(profiler.Collect(RangeProfiler::Ranges::kWindows, prepare, window));
  std::vector<DramBytes> out;
  for (int i = 0; i < windows; ++i) {
    ASSIGN_OR_RETURN(const std::vector<double> values,
                     profiler.Evaluate(static_cast<std::size_t>(i)));
    DramBytes bytes{values[0], values[1]};
    if (l2) {
      bytes.l2 = true;
      bytes.l2_read = values[2] * kSectorBytes;
      bytes.l2_write = values[3] * kSectorBytes;
    }
    out.push_back(bytes);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<DramBytes>> MeasureDramBytes(
    const CuptiLease& lease, int device, int windows, const std::function<absl::Status()>& prepare,
    const std::function<absl::Status()>& window) {
  if (!lease.attached() || lease.kind() != CuptiLease::Kind::kProfiler) {
    return absl::FailedPreconditionError("DRAM counters read without an attached lease");
  }
  RangeProfiler profiler;
  absl::StatusOr<std::vector<DramBytes>> out = Count(profiler, device, windows, prepare, window);
  if (!out.ok()) profiler.ForgetAvailability();
  return out;
}

}  // namespace kerneleval::server
