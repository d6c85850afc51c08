#include "server/cuda/pc_sampling.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <array>
#include <map>
#include <memory>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/driver/cuda_driver.h"

namespace kerneleval::server {
namespace {

// PCs read from CUPTI per call of cuptiPCSamplingGetData; the rest wait for the next.
constexpr std::size_t kPcsPerRead = 1024;
// Bound on the reads that drain one range: far more than a call's kernels have PCs.
constexpr int kMaxReads = 256;

absl::Status CuptiStatus(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return absl::OkStatus();
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return absl::UnavailableError(absl::StrCat("PC sampling unavailable: ", what, ": ",
                                             text != nullptr ? text : "CUPTI error ",
                                             text != nullptr ? "" : std::to_string(r)));
}

// PC sampling enabled on a context until destroyed.
class EnabledSampling {
 public:
  static absl::StatusOr<std::unique_ptr<EnabledSampling>> Enable(CUcontext ctx) {
    CUpti_PCSamplingEnableParams p = {};
    p.size = CUpti_PCSamplingEnableParamsSize;
    p.ctx = ctx;
    RETURN_IF_ERROR(CuptiStatus(cuptiPCSamplingEnable(&p), "cuptiPCSamplingEnable"));
    return std::unique_ptr<EnabledSampling>(new EnabledSampling(ctx));
  }
  EnabledSampling(const EnabledSampling&) = delete;
  EnabledSampling& operator=(const EnabledSampling&) = delete;
  ~EnabledSampling() {
    CUpti_PCSamplingDisableParams p = {};
    p.size = CUpti_PCSamplingDisableParamsSize;
    p.ctx = ctx_;
    cuptiPCSamplingDisable(&p);
  }

 private:
  explicit EnabledSampling(CUcontext ctx) : ctx_(ctx) {}
  CUcontext ctx_;
};

// The stall reasons of the context's device: their indices and CUPTI's names.
absl::Status StallReasons(CUcontext ctx, std::vector<std::uint32_t>* indices,
                          std::vector<std::string>* names) {
  std::size_t count = 0;
  CUpti_PCSamplingGetNumStallReasonsParams n = {};
  n.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
  n.ctx = ctx;
  n.numStallReasons = &count;
  RETURN_IF_ERROR(CuptiStatus(cuptiPCSamplingGetNumStallReasons(&n), "stall reasons"));
  indices->assign(count, 0);
  std::vector<std::array<char, CUPTI_STALL_REASON_STRING_SIZE>> text(count);
  std::vector<char*> text_ptrs(count);
  for (std::size_t i = 0; i < count; ++i) {
    text[i].fill('\0');
    text_ptrs[i] = text[i].data();
  }
  CUpti_PCSamplingGetStallReasonsParams r = {};
  r.size = CUpti_PCSamplingGetStallReasonsParamsSize;
  r.ctx = ctx;
  r.numStallReasons = count;
  r.stallReasonIndex = indices->data();
  r.stallReasons = text_ptrs.data();
  RETURN_IF_ERROR(CuptiStatus(cuptiPCSamplingGetStallReasons(&r), "stall reason names"));
  names->clear();
  for (std::size_t i = 0; i < count; ++i) {
    text[i].back() = '\0';
    names->emplace_back(text[i].data());
  }
  return absl::OkStatus();
}

// The buffer CUPTI writes parsed samples into: kPcsPerRead PCs, each with room for every
// stall reason.
struct SampleBuffer {
  explicit SampleBuffer(std::size_t reasons)
      : pcs(kPcsPerRead), reason_slots(kPcsPerRead * (reasons == 0 ? 1 : reasons)) {
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = kPcsPerRead;
    data.pPcData = pcs.data();
    for (std::size_t i = 0; i < kPcsPerRead; ++i) {
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = &reason_slots[i * (reasons == 0 ? 1 : reasons)];
    }
  }
  CUpti_PCSamplingData data = {};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<CUpti_PCSamplingStallReason> reason_slots;
};

absl::Status Configure(CUcontext ctx, std::vector<std::uint32_t>* reason_indices,
                       std::uint32_t period_log2, SampleBuffer* buffer) {
  std::vector<CUpti_PCSamplingConfigurationInfo> info(5);
  info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  info[0].attributeData.stallReasonData.stallReasonCount = reason_indices->size();
  info[0].attributeData.stallReasonData.pStallReasonIndex = reason_indices->data();
  info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
  info[1].attributeData.samplingPeriodData.samplingPeriod = period_log2;
  info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  info[2].attributeData.samplingDataBufferData.samplingDataBuffer = &buffer->data;
  info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
  info[3].attributeData.enableStartStopControlData.enableStartStopControl = 1;
  info[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  info[4].attributeData.collectionModeData.collectionMode =
      CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  CUpti_PCSamplingConfigurationInfoParams p = {};
  p.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  p.ctx = ctx;
  p.numAttributes = info.size();
  p.pPCSamplingConfigurationInfo = info.data();
  return CuptiStatus(cuptiPCSamplingSetConfigurationAttribute(&p), "configuration");
}

// Adds what `buffer` holds to `merged` (a PC may come in more than one read).
void Take(const SampleBuffer& buffer, const std::map<std::uint32_t, std::string>& names,
          std::map<std::tuple<std::uint64_t, std::string, std::uint64_t>,
                   std::map<std::string, std::uint64_t>>* merged) {
  const std::size_t n = std::min<std::size_t>(buffer.data.totalNumPcs, kPcsPerRead);
  for (std::size_t i = 0; i < n; ++i) {
    const CUpti_PCSamplingPCData& pc = buffer.pcs[i];
    // CUPTI allocates the function's name and keeps it: copied, never freed here.
    auto& reasons =
        (*merged)[{pc.cubinCrc, pc.functionName != nullptr ? pc.functionName : "", pc.pcOffset}];
    for (std::size_t r = 0; r < pc.stallReasonCount; ++r) {
      const auto name = names.find(pc.stallReason[r].pcSamplingStallReasonIndex);
      if (name != names.end()) reasons[name->second] += pc.stallReason[r].samples;
    }
  }
}

}  // namespace

absl::StatusOr<PcSamples> SamplePcs(const std::function<absl::Status()>& prepare,
                                    const std::function<absl::Status()>& call, int calls,
                                    std::uint32_t period_log2) {
  ASSIGN_OR_RETURN(const CudaDriver* driver, Driver());
  CUcontext ctx = nullptr;
  if (driver->CtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    return absl::UnavailableError("PC sampling unavailable: no current CUDA context");
  }
  // Declared before the session: cuptiPCSamplingDisable may still write into the buffer
  // (and read the reason list) configured for it, so both outlive it.
  std::unique_ptr<SampleBuffer> owned_buffer;
  std::vector<std::uint32_t> indices;
  ASSIGN_OR_RETURN(std::unique_ptr<EnabledSampling> enabled, EnabledSampling::Enable(ctx));
  std::vector<std::string> reason_names;
  RETURN_IF_ERROR(StallReasons(ctx, &indices, &reason_names));
  std::map<std::uint32_t, std::string> names;
  for (std::size_t i = 0; i < indices.size(); ++i) names[indices[i]] = reason_names[i];
  owned_buffer = std::make_unique<SampleBuffer>(indices.size());
  SampleBuffer& buffer = *owned_buffer;
  RETURN_IF_ERROR(Configure(ctx, &indices, period_log2, &buffer));

  std::map<std::tuple<std::uint64_t, std::string, std::uint64_t>,
           std::map<std::string, std::uint64_t>>
      merged;
  PcSamples out;
  out.period_log2 = period_log2;
  for (int c = 0; c < calls; ++c) {
    RETURN_IF_ERROR(prepare());
    CUpti_PCSamplingStartParams start = {};
    start.size = CUpti_PCSamplingStartParamsSize;
    start.ctx = ctx;
    RETURN_IF_ERROR(CuptiStatus(cuptiPCSamplingStart(&start), "cuptiPCSamplingStart"));
    const absl::Status ran = call();
    CUpti_PCSamplingStopParams stop = {};
    stop.size = CUpti_PCSamplingStopParamsSize;
    stop.ctx = ctx;
    RETURN_IF_ERROR(CuptiStatus(cuptiPCSamplingStop(&stop), "cuptiPCSamplingStop"));
    RETURN_IF_ERROR(ran);
    // The range's samples: what the stop left in the buffer, then the rest, read by read.
    for (int read = 0; read < kMaxReads; ++read) {
      Take(buffer, names, &merged);
      out.total += buffer.data.totalSamples;
      out.dropped += buffer.data.droppedSamples;
      if (read > 0 && buffer.data.remainingNumPcs == 0) break;
      buffer.data.totalNumPcs = 0;
      buffer.data.totalSamples = 0;
      buffer.data.droppedSamples = 0;
      CUpti_PCSamplingGetDataParams get = {};
      get.size = CUpti_PCSamplingGetDataParamsSize;
      get.ctx = ctx;
      get.pcSamplingData = &buffer.data;
      RETURN_IF_ERROR(CuptiStatus(cuptiPCSamplingGetData(&get), "cuptiPCSamplingGetData"));
    }
    buffer.data.totalNumPcs = 0;
    buffer.data.totalSamples = 0;
    buffer.data.droppedSamples = 0;
  }
  for (auto& [key, reasons] : merged) {
    SampledPc pc;
    std::tie(pc.cubin_crc, pc.function, pc.pc_offset) = key;
    pc.reasons.assign(reasons.begin(), reasons.end());
    out.pcs.push_back(std::move(pc));
  }
  return out;
}

}  // namespace kerneleval::server
