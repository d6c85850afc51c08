// Cold: each call starts from a flushed L2, one call per sample. No gate: the flush kernel
// ahead of the start event is long enough for the host to queue the call behind it.
#include <memory>

#include "server/cuda/cuda_measurement.h"

namespace kerneleval::server {
namespace {

class ColdMeasurement final : public CudaMeasurement {
 public:
  explicit ColdMeasurement(CudaDevice* device) : CudaMeasurement(device) {}

  absl::Status BeforeWindow() override { return device_.FlushL2(); }
  bool GatesEventWindow() const override { return false; }
  absl::Status Enqueue(CudaWorkspace* w, std::size_t position) override {
    return w->Launch(position);
  }
};

}  // namespace

std::unique_ptr<CudaMeasurement> MakeColdMeasurement(CudaDevice* device) {
  return std::make_unique<ColdMeasurement>(device);
}

}  // namespace kerneleval::server
