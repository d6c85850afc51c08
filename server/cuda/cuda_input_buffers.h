// The device buffers a measurement's calls read and write: the weight and the first input
// set kept from one measurement to the next, the rotation sets of this measurement only, and
// page-locked staging for the tensors of small calls. Owned by the device's worker thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "server/cuda/cuda_buffer_set.h"
#include "server/cuda/cuda_resources.h"
#include "server/device/backend.h"
#include "server/device/kept_buffers.h"

namespace kerneleval::server {

struct CudaWorkspace;

class CudaInputBuffers {
 public:
  // What the kept buffers may hold beyond the ones in use (server/device/kept_buffers.h).
  void set_budget_bytes(std::size_t bytes) { kept_buffers_.set_budget_bytes(bytes); }
  // Frees everything: before the device is reset.
  void Clear();

  // Allocates `w`'s input sets (one, or with options.rotate_inputs enough to leave nothing
  // of a set in L2 by its next use, given `l2_bytes`), copies the inputs to each on
  // `stream`, and with options.check_calls plans the checks and writes the guards
  // (server/cuda/cuda_call_checks_runner.h). `w` must have its problem and implementation set;
  // its weight points at the kept weight from here on.
  absl::Status Prepare(const Problem& problem, const HostInputs& inputs,
                       const MeasureOptions& options, std::size_t l2_bytes, cudaStream_t stream,
                       CudaWorkspace* w);

 private:
  // Copies small tensors into staging_; `staged` is left as is where they do not fit.
  absl::Status Stage(const Problem& problem, const HostInputs& inputs, CudaWorkspace* w,
                     HostInputs* staged);
  // One set's buffers, and the inputs copied into them.
  absl::Status FillSet(CudaBufferSet* s, const HostInputs& inputs, cudaStream_t stream,
                       CudaWorkspace* w);

  // Page-locked staging for the tensors of small calls (Stage), kept between calls.
  PinnedBuffer staging_;
  // The weight and first input set of the last call, kept for the next one where they are
  // large enough: cudaMalloc and cudaFree (which waits for the device) cost several times a
  // small kernel, on the path of every Run. Where a call needs other sizes, the buffers it
  // does not use wait in kept_buffers_ for the next call of their size, so that a workload
  // measured again runs on the buffers it ran on before (server/device/kept_buffers.h).
  DeviceBuffer kept_weight_;
  CudaBufferSet kept_set_;
  KeptBuffers<DeviceBuffer> kept_buffers_;
};

}  // namespace kerneleval::server
