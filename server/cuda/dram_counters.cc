#include "server/cuda/dram_counters.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kerneleval::server {
namespace {

// DRAM bytes, then L2 sectors (32 bytes each, every source unit: SM loads and stores, TMA).
const char* kMetrics[] = {"dram__bytes_read.sum", "dram__bytes_write.sum",
                          "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum"};
constexpr std::size_t kDramMetrics = 2;
constexpr std::size_t kAllMetrics = 4;
constexpr double kSectorBytes = 32;

absl::Status Unavailable(const char* call, CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return absl::UnavailableError(absl::StrCat("counters unavailable on this machine: ", call, ": ",
                                             text != nullptr ? text : "unknown CUPTI error"));
}

#define KE_CUPTI_OR_UNAVAILABLE(call)                             \
  do {                                                            \
    const CUptiResult ke_r_ = (call);                             \
    if (ke_r_ != CUPTI_SUCCESS) return Unavailable(#call, ke_r_); \
  } while (false)

// A context's counter availability image. Asking for it is the slowest step of opening the
// profiler (about 0.1 s on an H200, for every measurement that counts traffic), and within
// one context it does not change, so it is asked for once per context. A failure anywhere
// in a count forgets it, so that the next count asks again.
class AvailabilityCache {
 public:
  static AvailabilityCache& Get() {
    static AvailabilityCache* cache = new AvailabilityCache;  // never destroyed: no exit order
    return *cache;
  }

  absl::StatusOr<std::vector<std::uint8_t>> For(CUcontext ctx) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = images_.find(ctx); it != images_.end()) return it->second;
    }
    CUpti_Profiler_GetCounterAvailability_Params avail{
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = ctx;
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerGetCounterAvailability(&avail));
    std::vector<std::uint8_t> image(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = image.data();
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerGetCounterAvailability(&avail));
    std::lock_guard<std::mutex> lock(mu_);
    images_[ctx] = image;
    return image;
  }

  void Forget(CUcontext ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    images_.erase(ctx);
  }

 private:
  std::mutex mu_;
  std::map<CUcontext, std::vector<std::uint8_t>> images_;
};

// Owns the profiler's state for one measurement: the profiler itself, the host object that
// builds and evaluates images, and the range profiler bound to the context.
class RangeProfiler {
 public:
  RangeProfiler() = default;
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;
  ~RangeProfiler() {
    if (range_ != nullptr) {
      CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
      p.pRangeProfilerObject = range_;
      cuptiRangeProfilerDisable(&p);
    }
    if (host_ != nullptr) {
      CUpti_Profiler_Host_Deinitialize_Params p{
          CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
      p.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&p);
    }
    if (initialized_) {
      CUpti_Profiler_DeInitialize_Params p{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
      cuptiProfilerDeInitialize(&p);
    }
  }

  absl::Status Open(int device, int windows) {
    windows_ = windows;
    CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerInitialize(&init));
    initialized_ = true;

    CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = static_cast<std::size_t>(device);
    KE_CUPTI_OR_UNAVAILABLE(cuptiDeviceGetChipName(&chip));
    chip_ = chip.pChipName != nullptr ? chip.pChipName : "";

    // The driver's cuCtxGetCurrent through the runtime: linking libcuda would make every
    // binary need a driver just to start.
    using CtxGetCurrent = CUresult (*)(CUcontext*);
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUcontext ctx = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        entry == nullptr || reinterpret_cast<CtxGetCurrent>(entry)(&ctx) != CUDA_SUCCESS ||
        ctx == nullptr) {
      cudaGetLastError();
      return absl::UnavailableError("counters unavailable on this machine: no current context");
    }
    // Where counters are not permitted (gVisor, RestrictProfilingToAdminUsers), asking for
    // their availability is the call that says so.
    ctx_ = ctx;
    absl::StatusOr<std::vector<std::uint8_t>> availability = AvailabilityCache::Get().For(ctx);
    if (!availability.ok()) return availability.status();
    availability_ = *std::move(availability);

    // DRAM and L2 together where they fit one pass; else DRAM alone (the L2 figures then
    // unavailable). More passes would need the window replayed, which a cold window cannot be.
    absl::StatusOr<int> passes = Configure(kAllMetrics);
    if (!passes.ok() || *passes != 1) passes = Configure(kDramMetrics);
    if (!passes.ok()) return passes.status();
    if (*passes != 1) {
      return absl::UnavailableError(
          absl::StrCat("counters unavailable on this machine: DRAM counters need ", *passes,
                       " passes on ", chip_));
    }

    CUpti_RangeProfiler_Enable_Params enable{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    enable.ctx = ctx;
    KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerEnable(&enable));
    range_ = enable.pRangeProfilerObject;

    CUpti_RangeProfiler_GetCounterDataSize_Params data{
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    data.pRangeProfilerObject = range_;
    data.pMetricNames = kMetrics;
    data.numMetrics = metrics_;
    data.maxNumOfRanges = static_cast<std::size_t>(windows_);
    data.maxNumRangeTreeNodes = static_cast<std::size_t>(windows_);
    KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerGetCounterDataSize(&data));
    counter_data_.assign(data.counterDataSize, 0);
    return absl::OkStatus();
  }

  // A host object configured for the first `metrics` of kMetrics: the passes they need.
  absl::StatusOr<int> Configure(std::size_t metrics) {
    if (host_ != nullptr) {
      CUpti_Profiler_Host_Deinitialize_Params p{
          CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
      p.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&p);
      host_ = nullptr;
    }
    CUpti_Profiler_Host_Initialize_Params host{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip_.c_str();
    host.pCounterAvailabilityImage = availability_.data();
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostInitialize(&host));
    host_ = host.pHostObject;
    metrics_ = metrics;

    CUpti_Profiler_Host_ConfigAddMetrics_Params add{
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host_;
    add.ppMetricNames = kMetrics;
    add.numMetrics = metrics;
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params size{
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host_;
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetConfigImageSize(&size));
    config_.assign(size.configImageSize, 0);
    CUpti_Profiler_Host_GetConfigImage_Params image{
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetConfigImage(&image));
    CUpti_Profiler_Host_GetNumOfPasses_Params passes{
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = config_.size();
    passes.pConfigImage = config_.data();
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetNumOfPasses(&passes));
    return static_cast<int>(passes.numOfPasses);
  }

  // `windows_` ranges in one pass of the profiler, each around one `window`, `prepare` before
  // each outside every range; then each range evaluated. One start and stop for all of
  // them: starting the profiler costs about 70 ms on an H200, its ranges nothing.
  absl::StatusOr<std::vector<DramBytes>> Windows(const std::function<absl::Status()>& prepare,
                                                 const std::function<absl::Status()>& window) {
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params init{
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    init.pRangeProfilerObject = range_;
    init.counterDataSize = counter_data_.size();
    init.pCounterData = counter_data_.data();
    KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerCounterDataImageInitialize(&init));
    CUpti_RangeProfiler_SetConfig_Params config{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    config.pRangeProfilerObject = range_;
    config.configSize = config_.size();
    config.pConfig = config_.data();
    config.counterDataImageSize = counter_data_.size();
    config.pCounterDataImage = counter_data_.data();
    config.range = CUPTI_UserRange;
    config.replayMode = CUPTI_UserReplay;
    config.maxRangesPerPass = static_cast<std::size_t>(windows_);
    config.numNestingLevels = 1;
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerSetConfig(&config));

    CUpti_RangeProfiler_Start_Params start{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    start.pRangeProfilerObject = range_;
    KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerStart(&start));
    absl::Status ran = absl::OkStatus();
    CUptiResult push_or_pop = CUPTI_SUCCESS;
    for (int i = 0; i < windows_ && ran.ok() && push_or_pop == CUPTI_SUCCESS; ++i) {
      ran = prepare();
      if (!ran.ok()) break;
      const std::string name = absl::StrCat("window ", i + 1);
      CUpti_RangeProfiler_PushRange_Params push{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
      push.pRangeProfilerObject = range_;
      push.pRangeName = name.c_str();
      push_or_pop = cuptiRangeProfilerPushRange(&push);
      if (push_or_pop != CUPTI_SUCCESS) break;
      ran = window();
      CUpti_RangeProfiler_PopRange_Params pop{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
      pop.pRangeProfilerObject = range_;
      push_or_pop = cuptiRangeProfilerPopRange(&pop);
    }
    CUpti_RangeProfiler_Stop_Params stop{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    stop.pRangeProfilerObject = range_;
    const CUptiResult stopped = cuptiRangeProfilerStop(&stop);
    if (!ran.ok()) return ran;
    KE_CUPTI_OR_UNAVAILABLE(push_or_pop);
    KE_CUPTI_OR_UNAVAILABLE(stopped);
    if (stop.isAllPassSubmitted == 0) {
      return absl::UnavailableError(
          "counters unavailable on this machine: the ranges needed more than one pass");
    }
    CUpti_RangeProfiler_DecodeData_Params decode{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    decode.pRangeProfilerObject = range_;
    KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerDecodeData(&decode));
    if (decode.numOfRangeDropped > 0) {
      return absl::UnavailableError(
          absl::StrCat("counters unavailable on this machine: ", decode.numOfRangeDropped, " of ",
                       windows_, " ranges were dropped"));
    }
    std::vector<DramBytes> out;
    for (int i = 0; i < windows_; ++i) {
      ASSIGN_OR_RETURN(DramBytes bytes, Evaluate(static_cast<std::size_t>(i)));
      out.push_back(bytes);
    }
    return out;
  }

  // Forgets the context's availability image: after a failure the next count asks again.
  void ForgetAvailability() {
    if (ctx_ != nullptr) AvailabilityCache::Get().Forget(ctx_);
  }

 private:
  absl::StatusOr<DramBytes> Evaluate(std::size_t range) {
    double values[kAllMetrics] = {};
    CUpti_Profiler_Host_EvaluateToGpuValues_Params eval{
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    eval.pHostObject = host_;
    eval.pCounterDataImage = counter_data_.data();
    eval.counterDataImageSize = counter_data_.size();
    eval.rangeIndex = range;
    eval.ppMetricNames = kMetrics;
    eval.numMetrics = metrics_;
    eval.pMetricValues = values;
    KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostEvaluateToGpuValues(&eval));
    DramBytes bytes{values[0], values[1]};
    if (metrics_ == kAllMetrics) {
      bytes.l2 = true;
      bytes.l2_read = values[2] * kSectorBytes;
      bytes.l2_write = values[3] * kSectorBytes;
    }
    return bytes;
  }

  bool initialized_ = false;
  int windows_ = 1;
  CUcontext ctx_ = nullptr;
  std::string chip_;
  std::vector<std::uint8_t> availability_, config_, counter_data_;
  std::size_t metrics_ = kDramMetrics;  // how many of kMetrics are configured
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* range_ = nullptr;
};

}  // namespace

absl::StatusOr<std::vector<DramBytes>> MeasureDramBytes(
    const CuptiLease& lease, int device, int windows, const std::function<absl::Status()>& prepare,
    const std::function<absl::Status()>& window) {
  if (!lease.attached() || lease.kind() != CuptiLease::Kind::kProfiler) {
    return absl::FailedPreconditionError("DRAM counters read without an attached lease");
  }
  RangeProfiler profiler;
  absl::Status opened = profiler.Open(device, windows);
  absl::StatusOr<std::vector<DramBytes>> out = opened.ok()
                                                   ? profiler.Windows(prepare, window)
                                                   : absl::StatusOr<std::vector<DramBytes>>(opened);
  if (!out.ok()) profiler.ForgetAvailability();
  return out;
}

}  // namespace kerneleval::server
