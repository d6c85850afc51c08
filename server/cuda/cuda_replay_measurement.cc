// Hot and graph replay: calls that find what earlier calls left in L2 (unless graph replay
// is asked for cold), their event windows gated so that the host's launch stays out.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "common/status_macros.h"
#include "server/cuda/cuda_call_checks_runner.h"
#include "server/cuda/cuda_measurement.h"

namespace kerneleval::server {
namespace {

// Hot without a graph: one call per sample, back to back.
class HotMeasurement final : public CudaMeasurement {
 public:
  explicit HotMeasurement(CudaDevice* device) : CudaMeasurement(device) {}

  absl::Status BeforeWindow() override { return absl::OkStatus(); }
  bool GatesEventWindow() const override { return true; }
  absl::Status Enqueue(CudaWorkspace* w, std::size_t position) override {
    return w->Launch(position);
  }
};

// Graph replay: graph_calls launches (rotating sets, or with chained checks one slot each)
// captured once, replayed per sample; events around the replay, divided by the calls.
class GraphReplayMeasurement final : public CudaMeasurement {
 public:
  GraphReplayMeasurement(CudaDevice* device, bool cold) : CudaMeasurement(device), cold_(cold) {}

  absl::Status Build(const MeasureOptions& options, CudaWorkspace* w) override;
  void Drop() override { graph_.Reset(); }
  absl::Status BeforeWindow() override { return cold_ ? device_.FlushL2() : absl::OkStatus(); }
  bool GatesEventWindow() const override { return !cold_; }
  absl::Status Enqueue(CudaWorkspace* w, std::size_t) override {
    KE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_.get(), w->stream));
    return absl::OkStatus();
  }

 private:
  const bool cold_;
  CudaGraphExec graph_;
};

absl::Status GraphReplayMeasurement::Build(const MeasureOptions& options, CudaWorkspace* w) {
  cudaStream_t stream = w->stream;
  w->calls = std::max<std::uint32_t>(1, options.graph_calls);
  KE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  absl::Status captured = absl::OkStatus();
  for (std::uint32_t k = 0; k < w->calls && captured.ok(); ++k) {
    captured = w->Launch(w->Chained() ? k : k % w->sets.size());
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &raw);
  CudaGraph graph(raw);
  RETURN_IF_ERROR(captured);
  KE_CUDA_RETURN_IF_ERROR(end);
  cudaGraphExec_t exec = nullptr;
  KE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph.get(), 0));
  graph_ = CudaGraphExec(exec);
  // Launched once at once: an exec instantiated and uploaded but never launched slowed the
  // replays of other execs by ~0.18 us per kernel on an H200 (docs/results/measurement-h200.md).
  KE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_.get(), stream));
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (w->Chained() && !w->checks.finished) {
    // Its calls wrote the slots like any replay's: checked, and the slots poisoned again.
    for (std::uint32_t k = 0; k < w->calls; ++k) {
      w->checks.pending.push_back({/*first_launch=*/true, w->samples, k, w->calls});
    }
    RETURN_IF_ERROR(CheckBatch(options, w, /*again=*/true));
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<CudaMeasurement> MakeHotMeasurement(CudaDevice* device) {
  return std::make_unique<HotMeasurement>(device);
}

std::unique_ptr<CudaMeasurement> MakeGraphReplayMeasurement(CudaDevice* device, bool cold) {
  return std::make_unique<GraphReplayMeasurement>(device, cold);
}

}  // namespace kerneleval::server
