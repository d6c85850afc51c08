// One GPU's lifecycle and what every measurement on it shares: the primary context, the
// stream, the L2 flush of cold calls, the stream gate of hot event-timed calls and the
// clock admission before timing. Owned by the device's worker thread (not thread-safe).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/cuda/cuda_resources.h"

namespace kerneleval::server {

// Errors after which the context is unusable until the device is reset.
bool IsStickyError(cudaError_t e);

class CudaDevice {
 public:
  // Reads the device's properties (model, UUID, memory, L2, peak bandwidth); creates no
  // context.
  explicit CudaDevice(int ordinal);

  int ordinal() const { return ordinal_; }
  // The properties read at construction; measured figures and health are the backend's.
  const v1::Device& info() const { return info_; }
  cudaStream_t stream() const { return stream_.get(); }

  // Creates the primary context, the stream, the flush and the gate, and initializes the
  // CUPTI timer (its failure is reported by CuptiKernelTimer::StatusText, not here).
  absl::Status Open();
  // Drops every resource and resets the device: after a sticky fault, before Open again.
  void Reset();

  // Device-to-device copy bandwidth in bytes per second, read + written bytes counted.
  absl::StatusOr<double> MeasureCopyBandwidth();
  // Reads 2 x L2 on the stream, so that the next call starts with a cold cache.
  absl::Status FlushL2();
  // The stream gate (stream_gate_cuda.h): the stream waits at CloseGate until OpenGate.
  absl::Status CloseGate();
  void OpenGate();
  // Waits for a settled SM clock under load before timing (server/cuda/clock_admission.h).
  absl::Status Admit(v1::ClockAdmission* admission);

 private:
  const int ordinal_;
  v1::Device info_;
  CudaStream stream_;
  DeviceBuffer flush_;                // 2 x L2, read before cold calls
  DeviceBuffer flush_sink_;           // the flush kernel's never-taken store
  unsigned flush_calls_ = 0;          // FlushL2 cycles the flush's grid with it
  DeviceBuffer gate_flag_;            // the stream gate of hot event-timed calls ...
  CudaStream gate_stream_;            // ... and the stream that opens it
  std::uint8_t gate_generation_ = 0;  // the last gate's; each waits for its own value
};

}  // namespace kerneleval::server
