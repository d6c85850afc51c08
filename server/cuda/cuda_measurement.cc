#include "server/cuda/cuda_measurement.h"

#include <utility>
#include <vector>

#include "common/status_macros.h"

namespace kerneleval::server {

std::unique_ptr<CudaMeasurement> MakeCudaMeasurement(const MeasureOptions& options,
                                                     CudaDevice* device) {
  if (options.graph) return MakeGraphReplayMeasurement(device, options.cold);
  return options.cold ? MakeColdMeasurement(device) : MakeHotMeasurement(device);
}

absl::StatusOr<double> CudaMeasurement::TimeSample(v1::Timer timer, const CuptiLease& lease,
                                                   CudaWorkspace* w, std::size_t position) {
  cudaStream_t stream = w->stream;
  RETURN_IF_ERROR(BeforeWindow());
  if (timer == v1::TIMER_CUPTI) {
    // The flush must be done before the window opens: CUPTI's span would include it if it
    // ran as a kernel. Inside the window the call waits behind the stream gate until all
    // of it is queued, and the gate is left out of the span: the two-kernel baseline's span
    // otherwise included the host's gap between its launches and varied 6-31% from run to
    // run (H200, docs/results/measurement-h200.md).
    KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::vector<TimedKernel> kernels;
    ASSIGN_OR_RETURN(double span, CuptiKernelTimer::TimeKernels(
                                      lease, device_.ordinal(),
                                      [&]() -> absl::Status {
                                        RETURN_IF_ERROR(device_.CloseGate());
                                        const absl::Status enqueued = Enqueue(w, position);
                                        device_.OpenGate();
                                        RETURN_IF_ERROR(enqueued);
                                        KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
                                        return absl::OkStatus();
                                      },
                                      /*skip_first=*/true, w->calls == 1 ? &kernels : nullptr));
    // One call per window only: a graph's window holds up to 1000 calls' records, too many
    // to keep for every sample.
    if (w->calls == 1) w->kernel_windows.push_back(std::move(kernels));
    return span / w->calls;
  }
  // Events: cold, the flush kernel runs ahead of the start event, so the host has queued
  // the launch by the time the start event is reached; hot, the gate does that, in graph
  // replay too (scripts/torch_peers.py spins the device before every peer's start event
  // the same way): without it the first kernel of a replay waits for the host's
  // cudaGraphLaunch inside the window.
  const bool gated = GatesEventWindow();
  if (gated) RETURN_IF_ERROR(device_.CloseGate());
  const cudaError_t started = cudaEventRecord(w->start.get(), stream);
  const absl::Status enqueued = started == cudaSuccess ? Enqueue(w, position) : absl::OkStatus();
  const cudaError_t stopped = cudaEventRecord(w->stop.get(), stream);
  if (gated) device_.OpenGate();
  KE_CUDA_RETURN_IF_ERROR(started);
  RETURN_IF_ERROR(enqueued);
  KE_CUDA_RETURN_IF_ERROR(stopped);
  KE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(w->stop.get()));
  float ms = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, w->start.get(), w->stop.get()));
  return static_cast<double>(ms) * 1e-3 / w->calls;
}

}  // namespace kerneleval::server
