#include "server/cuda/cuda_dram_count.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cuda/dram_counters.h"

namespace kerneleval::server {

v1::DramTraffic CountDramBytes(const MeasureOptions& options, CudaDevice& device,
                               CudaMeasurement* protocol, CuptiLease* lease, CudaWorkspace* w) {
  // Three windows after the timed samples, never inside them: the profiler serializes the
  // work it counts. The median per call is reported.
  constexpr int kWindows = 3;
  v1::DramTraffic traffic;
  traffic.set_cold(options.cold);
  auto unavailable = [&](const absl::Status& s) {
    traffic.set_available(false);
    traffic.set_unavailable_reason(std::string(s.message()));
    return traffic;
  };
  // The profiler needs CUPTI to itself. A graph replayed while activity tracing was on
  // faults if launched after cuptiFinalize(), so it is rebuilt after the lease changes.
  const bool was_traced = lease->kind() == CuptiLease::Kind::kActivity;
  lease->Release();
  if (options.graph && was_traced) {
    protocol->Drop();
    if (absl::Status s = protocol->Build(options, w); !s.ok()) return unavailable(s);
  }
  absl::StatusOr<CuptiLease> profiler_lease = CuptiLease::Acquire(CuptiLease::Kind::kProfiler);
  if (!profiler_lease.ok()) {
    return unavailable(absl::UnavailableError(
        absl::StrCat("counters unavailable on this machine: ", profiler_lease.status().message())));
  }
  cudaStream_t stream = w->stream;
  std::size_t set = 0;
  absl::StatusOr<std::vector<DramBytes>> windows = MeasureDramBytes(
      *profiler_lease, device.ordinal(), kWindows,
      [&]() -> absl::Status {
        RETURN_IF_ERROR(protocol->BeforeWindow());
        KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        return absl::OkStatus();
      },
      [&]() -> absl::Status {
        RETURN_IF_ERROR(protocol->Enqueue(w, set));
        // Chained, the positions are slots (the window's calls), not input sets.
        set = (set + 1) % (w->Chained() ? w->checks.plan.batch_calls : w->sets.size());
        KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        return absl::OkStatus();
      });
  // The graph replayed under the profiler goes before CUPTI is detached.
  protocol->Drop();
  profiler_lease->Release();
  if (!windows.ok()) return unavailable(windows.status());
  std::vector<double> reads, writes, l2_reads, l2_writes;
  bool l2 = true;
  for (const DramBytes& b : *windows) {
    reads.push_back(b.read / w->calls);
    writes.push_back(b.write / w->calls);
    l2_reads.push_back(b.l2_read / w->calls);
    l2_writes.push_back(b.l2_write / w->calls);
    l2 = l2 && b.l2;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  traffic.set_available(true);
  traffic.set_windows(static_cast<std::uint32_t>(reads.size()));
  traffic.set_read_bytes(median(reads));
  traffic.set_write_bytes(median(writes));
  traffic.set_l2_available(l2);
  if (l2) {
    traffic.set_l2_read_bytes(median(l2_reads));
    traffic.set_l2_write_bytes(median(l2_writes));
  }
  return traffic;
}

}  // namespace kerneleval::server
