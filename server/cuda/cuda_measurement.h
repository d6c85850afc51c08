// How a timed sample is taken on a CUDA device: one class per protocol (cold, hot, graph
// replay), each deciding what happens before its window, whether the window is gated and
// what it launches; the timer (CUPTI or CUDA events) is the measurement's choice and works
// the same for every protocol (TimeSample). nvbench's measure_cold / measure_hot are the
// model. One object per measurement, on the device's worker thread; it must be destroyed
// before the measurement's CUPTI lease (a graph replayed under activity tracing faults if
// CUPTI is finalized first) and before the workspace whose buffers it launches on.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_workspace.h"
#include "server/cuda/cupti_timer.h"
#include "server/device/backend.h"

namespace kerneleval::server {

class CudaMeasurement {
 public:
  virtual ~CudaMeasurement() = default;
  CudaMeasurement(const CudaMeasurement&) = delete;
  CudaMeasurement& operator=(const CudaMeasurement&) = delete;

  // Before the first timed sample, and again after fresh module state or a change of CUPTI
  // lease (after Drop): graph replay captures its graph and launches it once. Sets
  // w->calls, the calls of one sample.
  virtual absl::Status Build(const MeasureOptions& options, CudaWorkspace* w) {
    return absl::OkStatus();
  }
  // Drops what Build made: before the module it captured is reset, or CUPTI changes hands.
  virtual void Drop() {}
  // Outside the window, just before it: the cold protocols flush L2.
  virtual absl::Status BeforeWindow() = 0;
  // Timed with events: whether the window's calls wait behind the stream gate until the
  // stop event is queued (else the events also time the host's launch).
  virtual bool GatesEventWindow() const = 0;
  // One sample's calls, from `position` (an input set, or with chained checks a slot).
  virtual absl::Status Enqueue(CudaWorkspace* w, std::size_t position) = 0;

  // One timed sample by `timer` (TIMER_CUPTI or TIMER_CUDA_EVENTS): seconds per call.
  // CUPTI windows of one call keep their kernels in w->kernel_windows.
  absl::StatusOr<double> TimeSample(v1::Timer timer, const CuptiLease& lease, CudaWorkspace* w,
                                    std::size_t position);

 protected:
  explicit CudaMeasurement(CudaDevice* device) : device_(*device) {}
  CudaDevice& device_;
};

// Cold, no graph: L2 flushed before each call (server/cuda/cuda_cold_measurement.cc).
std::unique_ptr<CudaMeasurement> MakeColdMeasurement(CudaDevice* device);
// Hot, no graph: calls back to back behind the stream gate
// (server/cuda/cuda_replay_measurement.cc).
std::unique_ptr<CudaMeasurement> MakeHotMeasurement(CudaDevice* device);
// Graph replay: options.graph_calls launches captured once and replayed per sample, cold
// or hot (server/cuda/cuda_replay_measurement.cc).
std::unique_ptr<CudaMeasurement> MakeGraphReplayMeasurement(CudaDevice* device, bool cold);

// The protocol `options` asks for (graph, cold).
std::unique_ptr<CudaMeasurement> MakeCudaMeasurement(const MeasureOptions& options,
                                                     CudaDevice* device);

}  // namespace kerneleval::server
