#include "server/cuda/cuda_result_call.h"

#include <chrono>
#include <cstring>

#include "common/status_macros.h"

namespace kerneleval::server {
namespace {

double Seconds(float ms) { return static_cast<double>(ms) * 1e-3; }

// Staged: the copies back follow the kernel in stream order into page-locked memory, and
// one wait covers both. They are timed on the device, from the kernel's end.
absl::Status CopyBackStaged(const HostOutputs& outputs, bool timed, const FusedAddRmsNormArgs& a,
                            CudaWorkspace* w, double* copy_back_seconds) {
  cudaStream_t stream = w->stream;
  const std::size_t row_bytes = w->problem->TensorBytes();
  const bool copies_residual = w->writes_residual && outputs.residual_out != nullptr;
  if (!timed) KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(w->stop.get(), stream));
  if (outputs.output != nullptr) {
    KE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(w->staged_output, a.output, row_bytes, cudaMemcpyDeviceToHost, stream));
  }
  if (copies_residual) {
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(w->staged_residual_out, a.residual_out, row_bytes,
                                            cudaMemcpyDeviceToHost, stream));
  }
  KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(w->copied.get(), stream));
  KE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(w->copied.get()));
  const auto landed = std::chrono::steady_clock::now();
  if (outputs.output != nullptr) std::memcpy(outputs.output, w->staged_output, row_bytes);
  if (copies_residual) std::memcpy(outputs.residual_out, w->staged_residual_out, row_bytes);
  float copy_ms = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&copy_ms, w->stop.get(), w->copied.get()));
  *copy_back_seconds =
      Seconds(copy_ms) +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - landed).count();
  return absl::OkStatus();
}

// Not staged: the kernel is waited for first so that the copies back are timed on their
// own; the copy to pageable memory would wait for it anyway.
absl::Status CopyBackDirect(const HostOutputs& outputs, const FusedAddRmsNormArgs& a,
                            CudaWorkspace* w, double* copy_back_seconds) {
  cudaStream_t stream = w->stream;
  const std::size_t row_bytes = w->problem->TensorBytes();
  const bool copies_back = outputs.output != nullptr || outputs.residual_out != nullptr;
  const bool copies_residual = w->writes_residual && outputs.residual_out != nullptr;
  if (copies_back) KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const auto computed = std::chrono::steady_clock::now();
  if (outputs.output != nullptr) {
    KE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(outputs.output, a.output, row_bytes, cudaMemcpyDeviceToHost, stream));
  }
  if (copies_residual) {
    KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(outputs.residual_out, a.residual_out, row_bytes,
                                            cudaMemcpyDeviceToHost, stream));
  }
  KE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (copies_back) {
    *copy_back_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - computed).count();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> RunResultCall(CudaDevice& device, const HostOutputs& outputs, bool timed,
                                     CudaWorkspace* w, double* copy_back_seconds) {
  // The result call on pristine inputs; its outputs are what the caller sees.
  cudaStream_t stream = w->stream;
  const std::size_t row_bytes = w->problem->TensorBytes();
  CudaBufferSet& s = *w->sets.front();
  if (!w->in_place) {
    // Poisoned so that an element the kernel does not write cannot pass as correct.
    KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.out.get(), 0xff, row_bytes, stream));
    if (w->writes_residual) {
      KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.res.get(), 0xff, row_bytes, stream));
    }
  }
  if (timed) {
    RETURN_IF_ERROR(device.CloseGate());
    KE_CUDA_RETURN_IF_ERROR(cudaEventRecord(w->start.get(), stream));
  }
  const absl::Status launched = w->Launch(0);
  if (timed) {
    // Opened before the copies back: a copy to pageable memory waits for the stream.
    const cudaError_t recorded = cudaEventRecord(w->stop.get(), stream);
    device.OpenGate();
    RETURN_IF_ERROR(launched);
    KE_CUDA_RETURN_IF_ERROR(recorded);
  }
  RETURN_IF_ERROR(launched);
  const FusedAddRmsNormArgs a = w->Args(s);
  const bool copies_back = outputs.output != nullptr || outputs.residual_out != nullptr;
  if (copies_back && w->staged_output != nullptr) {
    RETURN_IF_ERROR(CopyBackStaged(outputs, timed, a, w, copy_back_seconds));
  } else {
    RETURN_IF_ERROR(CopyBackDirect(outputs, a, w, copy_back_seconds));
  }
  if (!timed) return 0.0;
  float ms = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, w->start.get(), w->stop.get()));
  return Seconds(ms);
}

}  // namespace kerneleval::server
