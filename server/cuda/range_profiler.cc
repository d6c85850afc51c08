#include "server/cuda/range_profiler.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kerneleval::server {
namespace {

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

// A host object of the range profiler for `chip`, deinitialized when it goes.
class HostObject {
 public:
  HostObject() = default;
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;
  ~HostObject() { Reset(); }

  // `availability` may be null: the host API then plans for every counter being free.
  absl::Status Init(const std::string& chip, const std::uint8_t* availability) {
    Reset();
    CUpti_Profiler_Host_Initialize_Params host{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip.c_str();
    host.pCounterAvailabilityImage = availability;
    const CUptiResult r = cuptiProfilerHostInitialize(&host);
    if (r != CUPTI_SUCCESS) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUPTI's host profiler does not know the chip \"", chip, "\""));
    }
    object_ = host.pHostObject;
    return absl::OkStatus();
  }
  CUpti_Profiler_Host_Object* get() const { return object_; }
  CUpti_Profiler_Host_Object* release() { return std::exchange(object_, nullptr); }

  void Reset() {
    if (object_ == nullptr) return;
    CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = object_;
    cuptiProfilerHostDeinitialize(&p);
    object_ = nullptr;
  }

 private:
  CUpti_Profiler_Host_Object* object_ = nullptr;
};

CUptiResult AddMetrics(CUpti_Profiler_Host_Object* host, const char* const* names, std::size_t n) {
  CUpti_Profiler_Host_ConfigAddMetrics_Params add{
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = host;
  add.ppMetricNames = const_cast<const char**>(names);
  add.numMetrics = n;
  return cuptiProfilerHostConfigAddMetrics(&add);
}

// The configuration image of the metrics added to `host`, and the passes it needs.
absl::StatusOr<int> ConfigImage(CUpti_Profiler_Host_Object* host, std::vector<std::uint8_t>* out) {
  CUpti_Profiler_Host_GetConfigImageSize_Params size{
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  size.pHostObject = host;
  KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetConfigImageSize(&size));
  out->assign(size.configImageSize, 0);
  CUpti_Profiler_Host_GetConfigImage_Params image{
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  image.pHostObject = host;
  image.configImageSize = out->size();
  image.pConfigImage = out->data();
  KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetConfigImage(&image));
  CUpti_Profiler_Host_GetNumOfPasses_Params passes{
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  passes.configImageSize = out->size();
  passes.pConfigImage = out->data();
  KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetNumOfPasses(&passes));
  return static_cast<int>(passes.numOfPasses);
}

std::vector<const char*> Pointers(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  for (const std::string& n : names) out.push_back(n.c_str());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> MetricsOfChip(const std::string& chip,
                                                       const std::vector<std::string>& candidates) {
  // A metric the chip lacks leaves a host object unusable, so each is tried on its own.
  std::vector<std::string> out;
  HostObject host;
  for (const std::string& name : candidates) {
    if (absl::Status s = host.Init(chip, nullptr); !s.ok()) return s;
    const char* one = name.c_str();
    if (AddMetrics(host.get(), &one, 1) == CUPTI_SUCCESS) out.push_back(name);
  }
  return out;
}

absl::StatusOr<int> PassesOnChip(const std::string& chip, const std::vector<std::string>& metrics) {
  HostObject host;
  if (absl::Status s = host.Init(chip, nullptr); !s.ok()) return s;
  const std::vector<const char*> names = Pointers(metrics);
  if (const CUptiResult r = AddMetrics(host.get(), names.data(), names.size());
      r != CUPTI_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("a metric is not one of ", chip, "'s: ", Unavailable("add", r).message()));
  }
  std::vector<std::uint8_t> image;
  return ConfigImage(host.get(), &image);
}

RangeProfiler::~RangeProfiler() {
  if (range_ != nullptr) {
    CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = range_;
    cuptiRangeProfilerDisable(&p);
  }
  if (host_ != nullptr) {
    CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = host_;
    cuptiProfilerHostDeinitialize(&p);
  }
  if (initialized_) {
    CUpti_Profiler_DeInitialize_Params p{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    cuptiProfilerDeInitialize(&p);
  }
}

absl::Status RangeProfiler::Open(int device) {
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
  return absl::OkStatus();
}

absl::StatusOr<int> RangeProfiler::Configure(const std::vector<std::string>& metrics,
                                             int max_ranges) {
  if (range_ != nullptr) {
    CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = range_;
    cuptiRangeProfilerDisable(&p);
    range_ = nullptr;
  }
  HostObject host;
  if (absl::Status s = host.Init(chip_, availability_.data()); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("counters unavailable on this machine: ", s.message()));
  }
  if (host_ != nullptr) {
    CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = host_;
    cuptiProfilerHostDeinitialize(&p);
  }
  host_ = host.release();
  metric_names_ = metrics;
  metrics_ = Pointers(metric_names_);
  max_ranges_ = max_ranges;
  KE_CUPTI_OR_UNAVAILABLE(AddMetrics(host_, metrics_.data(), metrics_.size()));
  absl::StatusOr<int> passes = ConfigImage(host_, &config_);
  if (!passes.ok()) return passes.status();

  CUpti_RangeProfiler_Enable_Params enable{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  enable.ctx = ctx_;
  KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerEnable(&enable));
  range_ = enable.pRangeProfilerObject;
  CUpti_RangeProfiler_GetCounterDataSize_Params data{
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  data.pRangeProfilerObject = range_;
  data.pMetricNames = metrics_.data();
  data.numMetrics = metrics_.size();
  data.maxNumOfRanges = static_cast<std::size_t>(max_ranges_);
  data.maxNumRangeTreeNodes = static_cast<std::size_t>(max_ranges_);
  KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerGetCounterDataSize(&data));
  counter_data_.assign(data.counterDataSize, 0);
  return passes;
}

absl::Status RangeProfiler::Collect(Ranges ranges, const std::function<absl::Status()>& prepare,
                                    const std::function<absl::Status()>& window, int* passes) {
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
  config.range = ranges == Ranges::kWindows ? CUPTI_UserRange : CUPTI_AutoRange;
  // We replay: each pass starts from the caller's preparation (an L2 flush), as a timed call
  // does. Where a driver refuses that for ranges per kernel, CUPTI replays each kernel
  // itself, restoring the memory it wrote between its passes.
  config.replayMode = CUPTI_UserReplay;
  kernel_replay_ = false;
  config.maxRangesPerPass = static_cast<std::size_t>(max_ranges_);
  config.numNestingLevels = 1;
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  CUptiResult set = cuptiRangeProfilerSetConfig(&config);
  if (set != CUPTI_SUCCESS && ranges == Ranges::kKernels) {
    config.replayMode = CUPTI_KernelReplay;
    kernel_replay_ = true;
    set = cuptiRangeProfilerSetConfig(&config);
  }
  if (set != CUPTI_SUCCESS) return Unavailable("cuptiRangeProfilerSetConfig", set);

  // The windows of a DRAM count cannot be replayed (a cold window's state is gone once it
  // ran): one pass. A profile replays its one call, from the same preparation, per pass.
  const int max_passes = ranges == Ranges::kWindows ? 1 : 256;
  bool all_submitted = false;
  int pass = 0;
  while (!all_submitted && pass < max_passes) {
    if (absl::Status s = Submit(ranges, prepare, window, &all_submitted); !s.ok()) return s;
    ++pass;
  }
  if (passes != nullptr) *passes = pass;
  if (!all_submitted) {
    return absl::UnavailableError(
        absl::StrCat("counters unavailable on this machine: the counters needed more than ",
                     max_passes, max_passes == 1 ? " pass" : " passes"));
  }
  CUpti_RangeProfiler_DecodeData_Params decode{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  decode.pRangeProfilerObject = range_;
  KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerDecodeData(&decode));
  if (decode.numOfRangeDropped > 0) {
    return absl::UnavailableError(absl::StrCat("counters unavailable on this machine: ",
                                               decode.numOfRangeDropped, " ranges were dropped"));
  }
  CUpti_RangeProfiler_GetCounterDataInfo_Params info{
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerGetCounterDataInfo(&info));
  ranges_ = info.numTotalRanges;
  return absl::OkStatus();
}

absl::Status RangeProfiler::Submit(Ranges ranges, const std::function<absl::Status()>& prepare,
                                   const std::function<absl::Status()>& window,
                                   bool* all_submitted) {
  const int windows = ranges == Ranges::kWindows ? max_ranges_ : 1;
  if (ranges == Ranges::kKernels) {
    // The preparation (an L2 flush) launches kernels too: it goes before the pass starts.
    if (absl::Status s = prepare(); !s.ok()) return s;
  }
  CUpti_RangeProfiler_Start_Params start{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  start.pRangeProfilerObject = range_;
  KE_CUPTI_OR_UNAVAILABLE(cuptiRangeProfilerStart(&start));
  absl::Status ran = absl::OkStatus();
  CUptiResult push_or_pop = CUPTI_SUCCESS;
  for (int i = 0; i < windows && ran.ok() && push_or_pop == CUPTI_SUCCESS; ++i) {
    if (ranges == Ranges::kKernels) {
      ran = window();
      break;
    }
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
  *all_submitted = stop.isAllPassSubmitted != 0;
  return absl::OkStatus();
}

absl::StatusOr<std::string> RangeProfiler::RangeName(std::size_t range) const {
  CUpti_Profiler_Host_GetRangeName_Params info{CUpti_Profiler_Host_GetRangeName_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  info.rangeIndex = range;
  info.delimiter = "/";
  KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostGetRangeName(&info));
  std::string name = info.pRangeName != nullptr ? info.pRangeName : "";
  // CUPTI allocates the name; freeing it is the caller's part.
  std::free(const_cast<char*>(info.pRangeName));
  return name;
}

absl::StatusOr<std::vector<double>> RangeProfiler::Evaluate(std::size_t range) const {
  std::vector<double> values(metrics_.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params eval{
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
  eval.pHostObject = host_;
  eval.pCounterDataImage = counter_data_.data();
  eval.counterDataImageSize = counter_data_.size();
  eval.rangeIndex = range;
  eval.ppMetricNames = const_cast<const char**>(metrics_.data());
  eval.numMetrics = metrics_.size();
  eval.pMetricValues = values.data();
  KE_CUPTI_OR_UNAVAILABLE(cuptiProfilerHostEvaluateToGpuValues(&eval));
  return values;
}

void RangeProfiler::ForgetAvailability() {
  if (ctx_ != nullptr) AvailabilityCache::Get().Forget(ctx_);
}

}  // namespace kerneleval::server
