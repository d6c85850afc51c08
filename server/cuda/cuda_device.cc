#include "server/cuda/cuda_device.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kerneleval/kernels/l2_flush_cuda.h"
#include "kerneleval/kernels/stream_gate_cuda.h"
#include "server/cuda/clock_admission.h"
#include "server/cuda/cupti_timer.h"
#include "server/figures/sol.h"

namespace kerneleval::server {
namespace {

// A gate the host fails to open lets the stream go after this long (device clock).
constexpr unsigned long long kGateTimeoutNs = 1'000'000'000ull;

std::string UuidString(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

}  // namespace

bool IsStickyError(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  v1::Device& d = info_;
  d.set_name(absl::StrCat("cuda:", ordinal));
  d.set_kind("cuda");
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal_) == cudaSuccess) {
    d.set_model(prop.name);
    d.set_uuid(UuidString(prop.uuid));
    d.set_sm_count(prop.multiProcessorCount);
    d.set_memory_bytes(prop.totalGlobalMem);
    d.set_l2_cache_bytes(static_cast<std::uint64_t>(prop.l2CacheSize));
    d.set_compute_capability(absl::StrCat(prop.major, ".", prop.minor));
  }
  // CUDA 13 removed cudaDeviceProp::memoryClockRate; the attribute is the supported path.
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal_);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal_);
  d.set_memory_clock_khz(clock_khz);
  d.set_memory_bus_width_bits(bus_bits);
  d.set_peak_bytes_per_second(AttributePeakBytesPerSecond(clock_khz, bus_bits));
  if (auto sheet = DatasheetPeakBytesPerSecond(d.model())) d.set_datasheet_bytes_per_second(*sheet);
  cudaGetLastError();
}

absl::Status CudaDevice::Open() {
  KE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  KE_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the primary context now
  ASSIGN_OR_RETURN(stream_, CreateStream());
  ASSIGN_OR_RETURN(flush_, DeviceBuffer::Allocate(2 * info_.l2_cache_bytes()));
  ASSIGN_OR_RETURN(flush_sink_, DeviceBuffer::Allocate(sizeof(unsigned)));
  ASSIGN_OR_RETURN(gate_flag_, DeviceBuffer::Allocate(sizeof(int)));
  ASSIGN_OR_RETURN(gate_stream_, CreateStream());
  gate_generation_ = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gate_flag_.get(), 0, sizeof(int), stream_.get()));
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flush_.get(), 0, flush_.bytes(), stream_.get()));
  // Failure is reported in TimerStatus(), not fatal: CUDA events remain.
  CuptiKernelTimer::Initialize().IgnoreError();
  return absl::OkStatus();
}

void CudaDevice::Reset() {
  stream_.Reset();
  flush_ = DeviceBuffer();
  flush_sink_ = DeviceBuffer();
  gate_flag_ = DeviceBuffer();
  gate_stream_.Reset();
  KE_CUDA_NO_THROW(cudaSetDevice(ordinal_));
  KE_CUDA_NO_THROW(cudaDeviceReset());
  KE_CUDA_NO_THROW(cudaGetLastError());
}

absl::StatusOr<double> CudaDevice::MeasureCopyBandwidth() {
  // Device-to-device copy, read + written bytes counted, best of five: the achievable
  // streaming bandwidth (about 88% of the attribute peak on an H200).
  std::size_t free_bytes = 0, total = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free_bytes / 8);
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(CudaEvent start, CreateEvent());
  ASSIGN_OR_RETURN(CudaEvent stop, CreateEvent());
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(src.get(), 1, bytes, stream_.get()));
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream_.get()));
    KE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream_.get()));
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream_.get()));
    KE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
    float ms = 0;
    KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    const double seconds = static_cast<double>(ms) * 1e-3;
    if (i > 0 && ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds);
  }
  return best;
}

absl::Status CudaDevice::FlushL2() {
  if (flush_.bytes() == 0) return absl::OkStatus();
  // The flush's grid grows by one CTA per call, cycling over the SM count. With the same
  // grid every call, the calls of a measurement all started from one state of the CTA
  // scheduler (their CTAs on the same SMs), apparently set by what ran before it: the
  // two-kernel baseline's second kernel, which reads what the first left in L2, ran 1408
  // ns in some measurements and 1536-1600 in others (B = 34 / 64, H200), its mean 9%
  // apart over four runs of one server. Cycled: 0.7-2.0%, and three runs of both suites
  // within 1.9% at every workload (docs/results/measurement-h200.md).
  const int sms = info_.sm_count();
  const int extra = sms > 0 ? static_cast<int>(flush_calls_++ % static_cast<unsigned>(sms)) : 0;
  KE_CUDA_RETURN_IF_ERROR(LaunchL2Flush(flush_.get(), flush_.bytes(),
                                        static_cast<unsigned*>(flush_sink_.get()), sms,
                                        stream_.get(), extra));
  return absl::OkStatus();
}

// Hot calls timed with events run behind a gate (stream_gate_cuda.h) that opens once the
// start event, the call and the stop event are queued: without it the events also time the
// host's launch. Cold calls need none: the flush kernel ahead of them is long enough.
// Each gate waits for its own generation's value, so closing it is the launch alone.
absl::Status CudaDevice::CloseGate() {
  gate_generation_ = gate_generation_ == 255 ? 1 : gate_generation_ + 1;
  KE_CUDA_RETURN_IF_ERROR(LaunchStreamGate(static_cast<volatile int*>(gate_flag_.get()),
                                           static_cast<int>(gate_generation_ * 0x01010101u),
                                           kGateTimeoutNs, stream_.get()));
  return absl::OkStatus();
}

// A write from a second stream: a host-mapped flag would do, but a process whose context
// faults with page-locked host memory mapped takes ~1 s longer to fail and its successor
// ~2 s longer to start (H200, docs/results/device-isolation-h200.md). The write sets every
// byte of the flag to the generation, which is the value the gate waits for.
void CudaDevice::OpenGate() {
  if (cudaMemsetAsync(gate_flag_.get(), gate_generation_, sizeof(int), gate_stream_.get()) !=
      cudaSuccess) {
    cudaGetLastError();  // not sticky; the gate then opens by its timeout
  }
}

absl::Status CudaDevice::Admit(v1::ClockAdmission* admission) {
  // The load: 64 reads of 2x L2, ~2 ms on an H200, between two NVML reads.
  auto busy = [&]() -> absl::Status {
    for (int i = 0; i < 64 && flush_.bytes() > 0; ++i) {
      KE_CUDA_RETURN_IF_ERROR(LaunchL2Flush(flush_.get(), flush_.bytes(),
                                            static_cast<unsigned*>(flush_sink_.get()),
                                            info_.sm_count(), stream_.get()));
    }
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return absl::OkStatus();
  };
  return AdmitClocks(info_.uuid(), busy, AdmissionLimits{}, admission);
}

}  // namespace kerneleval::server
