#include "server/cuda/cupti_timer.h"

#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/device/device_settings.h"

namespace kerneleval::server {
namespace {

constexpr std::size_t kBufferBytes = 1 << 20;
constexpr std::size_t kAlign = 8;

struct Collector {
  std::mutex mu;
  std::map<std::uint32_t, std::vector<TimedKernel>> by_device;
};

Collector& collector() {
  static Collector* c = new Collector;  // never destroyed: CUPTI may call back at exit
  return *c;
}

// Exclusive for attached leases, shared for the others.
std::shared_mutex& lease_mutex() {
  static std::shared_mutex* m = new std::shared_mutex;
  return *m;
}

std::once_flag init_once;
absl::Status init_status = absl::UnknownError("not initialized");

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Collector& c = collector();
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(c.mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      // CUPTI's name string is shared by the kernel's records and is not ours to keep: a
      // copy, demangled only once per measurement (SummarizeKernels).
      TimedKernel t;
      t.start = k->start;
      t.end = k->end;
      t.name = k->name != nullptr ? std::string(k->name) : std::string();
      t.grid[0] = static_cast<std::uint32_t>(k->gridX);
      t.grid[1] = static_cast<std::uint32_t>(k->gridY);
      t.grid[2] = static_cast<std::uint32_t>(k->gridZ);
      t.block[0] = static_cast<std::uint32_t>(k->blockX);
      t.block[1] = static_cast<std::uint32_t>(k->blockY);
      t.block[2] = static_cast<std::uint32_t>(k->blockZ);
      t.cluster[0] = k->clusterX;
      t.cluster[1] = k->clusterY;
      t.cluster[2] = k->clusterZ;
      t.registers_per_thread = k->registersPerThread;
      t.static_shared_bytes = k->staticSharedMemory;
      t.dynamic_shared_bytes = k->dynamicSharedMemory;
      c.by_device[k->deviceId].push_back(std::move(t));
    }
  }
  std::free(buffer);
}

std::string CuptiError(const char* what, CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return absl::StrCat(what, ": ", text != nullptr ? text : "unknown CUPTI error");
}

// Registers the activity callbacks. After cuptiFinalize() they must be registered again
// (measured: records of a second window arrive complete, none dropped).
absl::Status AttachActivity() {
  CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (r != CUPTI_SUCCESS) {
    return absl::UnavailableError(CuptiError("cuptiActivityRegisterCallbacks", r));
  }
  return absl::OkStatus();
}

void Detach(bool activity) {
  if (activity) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  // Removes every trace of CUPTI from later launches: graph replay returns to 1.44 us per
  // kernel from 1.46-1.80 attached-but-disabled (H200, docs/results/measurement-h200.md).
  cuptiFinalize();
}

}  // namespace

absl::StatusOr<CuptiLease> CuptiLease::Acquire(Kind kind) {
  CuptiLease lease;
  lease.kind_ = kind;
  if (kind == Kind::kShared) {
    lease.shared_ = std::shared_lock<std::shared_mutex>(lease_mutex());
    return lease;
  }
  if (const absl::Status s = CuptiKernelTimer::Initialize(); !s.ok()) return s;
  lease.unique_ = std::unique_lock<std::shared_mutex>(lease_mutex());
  // Registering the activity callbacks also initializes CUPTI again after a
  // cuptiFinalize(); without it the profiler answered CUPTI_ERROR_NOT_INITIALIZED (H200).
  // No activity kind is enabled outside a window, so nothing is traced.
  if (absl::Status s = AttachActivity(); !s.ok()) {
    cuptiFinalize();
    lease.unique_.unlock();
    return s;
  }
  return lease;
}

CuptiLease::CuptiLease(CuptiLease&& o) noexcept
    : kind_(o.kind_), shared_(std::move(o.shared_)), unique_(std::move(o.unique_)) {}

CuptiLease& CuptiLease::operator=(CuptiLease&& o) noexcept {
  if (this != &o) {
    Release();
    kind_ = o.kind_;
    shared_ = std::move(o.shared_);
    unique_ = std::move(o.unique_);
  }
  return *this;
}

void CuptiLease::Release() {
  if (unique_.owns_lock()) {
    Detach(/*activity=*/true);
    unique_.unlock();
  }
  if (shared_.owns_lock()) shared_.unlock();
}

absl::Status CuptiKernelTimer::Initialize() {
  std::call_once(init_once, [] {
    if (CurrentDeviceSettings().disable_cupti) {
      init_status = absl::UnavailableError("disabled by --disable-cupti");
      return;
    }
    // A probe: attach, enable kernel activity, detach. The process then runs as if CUPTI
    // had never been loaded until a measurement asks for it.
    std::unique_lock<std::shared_mutex> lock(lease_mutex());
    absl::Status attached = AttachActivity();
    if (!attached.ok()) {
      init_status = attached;
      cuptiFinalize();
      return;
    }
    const CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    Detach(/*activity=*/true);
    init_status = r == CUPTI_SUCCESS ? absl::OkStatus()
                                     : absl::UnavailableError(CuptiError("cuptiActivityEnable", r));
  });
  return init_status;
}

bool CuptiKernelTimer::Available() { return Initialize().ok(); }

std::string CuptiKernelTimer::StatusText() {
  const absl::Status s = Initialize();
  return s.ok() ? "CUPTI activity records (kernel-only), attached only for windows that ask "
                  "for them"
                : absl::StrCat("CUPTI unavailable (", s.message(), "); CUDA events used");
}

absl::StatusOr<double> CuptiKernelTimer::TimeKernels(
    const CuptiLease& lease, int device, const std::function<absl::Status()>& launch_and_sync,
    bool skip_first, std::vector<TimedKernel>* kernels) {
  if (!lease.attached() || lease.kind() != CuptiLease::Kind::kActivity) {
    return absl::FailedPreconditionError("CUPTI window opened without an attached lease");
  }
  // Collection is on only inside the window: with tracing on, every kernel carries tracing
  // overhead (graph replay of the 1-row kernel: 2.4 us per call against 1.2-1.4 us).
  const CUptiResult enabled = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (enabled != CUPTI_SUCCESS) {
    return absl::UnavailableError(CuptiError("cuptiActivityEnable", enabled));
  }
  Begin(device);
  absl::Status launched = launch_and_sync();
  absl::StatusOr<double> span =
      launched.ok() ? End(device, skip_first, kernels) : absl::StatusOr<double>(launched);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  return span;
}

void CuptiKernelTimer::Begin(int device) {
  // Forced, so that records of earlier kernels (the L2 flush) cannot arrive after the clear.
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Collector& c = collector();
  std::lock_guard<std::mutex> lock(c.mu);
  c.by_device[static_cast<std::uint32_t>(device)].clear();
}

absl::StatusOr<double> CuptiKernelTimer::End(int device, bool skip_first,
                                             std::vector<TimedKernel>* kernels) {
  // A forced flush also hands over records of the buffer still being filled.
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Collector& c = collector();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<TimedKernel>& spans = c.by_device[static_cast<std::uint32_t>(device)];
  std::sort(spans.begin(), spans.end(),
            [](const TimedKernel& a, const TimedKernel& b) { return a.start < b.start; });
  if (skip_first && !spans.empty()) spans.erase(spans.begin());
  if (spans.empty()) {
    return absl::FailedPreconditionError("CUPTI recorded no kernel for the timed call");
  }
  const std::uint64_t first = spans.front().start;
  std::uint64_t last = spans.front().end;
  for (const TimedKernel& s : spans) last = std::max(last, s.end);
  if (kernels != nullptr) {
    *kernels = std::move(spans);
  }
  spans.clear();
  return static_cast<double>(last - first) * 1e-9;
}

}  // namespace kerneleval::server
