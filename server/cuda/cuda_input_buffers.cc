#include "server/cuda/cuda_input_buffers.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/status_macros.h"
#include "server/cuda/cuda_call_checks_runner.h"
#include "server/cuda/cuda_workspace.h"

namespace kerneleval::server {
namespace {

// The roles of KeptBuffers (server/device/kept_buffers.h): which tensor a kept buffer held.
enum BufferRole : int { kWeightRole, kXRole, kRRole, kOutRole, kResRole, kScratchRole };

// A rotation set's buffer: new for each measurement.
absl::Status Allocate(DeviceBuffer* b, std::size_t bytes) {
  ASSIGN_OR_RETURN(*b, DeviceBuffer::Allocate(bytes));
  return absl::OkStatus();
}

// Every byte of `b` (when it is allocated) zeroed on `stream`.
absl::Status Scrub(DeviceBuffer* b, cudaStream_t stream) {
  if (b->get() == nullptr) return absl::OkStatus();
  KE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b->get(), 0, b->bytes(), stream));
  return absl::OkStatus();
}

// Input sets: one, or enough that rotating among them leaves nothing of a set in L2 by its
// next use (3x L2 in total), within a quarter of the free memory.
absl::StatusOr<std::size_t> SetsWanted(const MeasureOptions& options, std::size_t set_bytes,
                                       std::size_t l2_bytes) {
  if (!options.rotate_inputs || set_bytes == 0) return 1;
  std::size_t free_bytes = 0, total = 0;
  KE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t by_l2 = 3 * l2_bytes / set_bytes + 1;
  const std::size_t by_memory = std::max<std::size_t>(1, free_bytes / 4 / set_bytes);
  return std::clamp<std::size_t>(std::min(by_l2, by_memory), 1, 64);
}

}  // namespace

void CudaInputBuffers::Clear() {
  kept_weight_ = DeviceBuffer();
  kept_set_ = CudaBufferSet();
  kept_buffers_.Clear();
  staging_ = PinnedBuffer();
}

absl::Status CudaInputBuffers::Stage(const Problem& problem, const HostInputs& inputs,
                                     CudaWorkspace* w, HostInputs* staged) {
  // Up to a few MiB: a small Run's copies from pageable memory cost more than the copy into
  // staging, and they are synchronous, each its own wait for the device.
  constexpr std::size_t kMaxStagingBytes = 8 << 20;
  auto aligned = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::size_t tensor = aligned(problem.TensorBytes());
  const std::size_t weight = aligned(problem.WeightBytes());
  const std::size_t bytes = tensor * (WritesResidual(problem.mode) ? 4 : 3) + weight;
  if (bytes > kMaxStagingBytes) return absl::OkStatus();
  if (staging_.bytes() < bytes) {
    staging_ = PinnedBuffer();
    absl::StatusOr<PinnedBuffer> pinned = PinnedBuffer::Allocate(kMaxStagingBytes);
    if (!pinned.ok()) {
      cudaGetLastError();  // not sticky; the copies then go from pageable memory
      return absl::OkStatus();
    }
    staging_ = *std::move(pinned);
  }
  ASSIGN_OR_RETURN(w->copied, CreateEvent());
  auto* base = static_cast<unsigned char*>(staging_.get());
  std::memcpy(base, inputs.hidden_states, problem.TensorBytes());
  std::memcpy(base + tensor, inputs.residual, problem.TensorBytes());
  std::memcpy(base + 2 * tensor, inputs.weight, problem.WeightBytes());
  *staged = {base, base + tensor, base + 2 * tensor};
  w->staged_output = base + 2 * tensor + weight;
  w->staged_residual_out = WritesResidual(problem.mode) ? w->staged_output + tensor : nullptr;
  return absl::OkStatus();
}

absl::Status CudaInputBuffers::Prepare(const Problem& problem, const HostInputs& given,
                                       const MeasureOptions& options, std::size_t l2_bytes,
                                       cudaStream_t stream, CudaWorkspace* w) {
  w->stream = stream;
  w->weight = &kept_weight_;
  HostInputs inputs = given;
  RETURN_IF_ERROR(Stage(problem, given, w, &inputs));
  const std::size_t row_bytes = problem.TensorBytes();
  const CudaImplementation& impl = *w->impl;
  w->writes_residual = WritesResidual(problem.mode);
  w->in_place = problem.mode == Mode::kInPlace;
  const std::size_t set_bytes =
      row_bytes * (2 + (w->in_place ? 0 : 1) + (w->writes_residual && !w->in_place ? 1 : 0) +
                   (impl.needs_scratch ? 1 : 0));
  ASSIGN_OR_RETURN(const std::size_t sets_wanted, SetsWanted(options, set_bytes, l2_bytes));
  // Checked calls: every tensor is followed by a guard region (call_checks.h).
  RETURN_IF_ERROR(PlanCheckedCalls(problem, options, w));
  const std::size_t guard = w->checks.on ? w->checks.plan.guard_bytes : 0;
  RETURN_IF_ERROR(kept_buffers_.Fit(kWeightRole, problem.WeightBytes() + guard, &kept_weight_));
  if (w->checks.on) RETURN_IF_ERROR(Scrub(&kept_weight_, stream));  // as FillSet's buffers
  KE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(kept_weight_.get(), inputs.weight, problem.WeightBytes(),
                                          cudaMemcpyHostToDevice, stream));
  // Kept before any call of the submission can touch it: a change made by the result call
  // shows at the first checked call.
  if (w->checks.on) RETURN_IF_ERROR(KeepPristineWeight(w));
  // The first set is the kept one; rotation sets live for this measurement only.
  w->rotation.resize(sets_wanted - 1);
  w->sets = {&kept_set_};
  for (CudaBufferSet& s : w->rotation) w->sets.push_back(&s);
  for (CudaBufferSet* s : w->sets) RETURN_IF_ERROR(FillSet(s, inputs, stream, w));
  ASSIGN_OR_RETURN(w->start, CreateEvent());
  ASSIGN_OR_RETURN(w->stop, CreateEvent());
  return absl::OkStatus();
}

absl::Status CudaInputBuffers::FillSet(CudaBufferSet* s, const HostInputs& inputs,
                                       cudaStream_t stream, CudaWorkspace* w) {
  const std::size_t row_bytes = w->problem->TensorBytes();
  const std::size_t guard = w->checks.on ? w->checks.plan.guard_bytes : 0;
  // The kept set's buffers come back for each later call of their size; a rotation set's
  // are this measurement's only.
  auto fit = [&](BufferRole role, DeviceBuffer* b, std::size_t bytes) {
    return s == &kept_set_ ? kept_buffers_.Fit(role, bytes, b) : Allocate(b, bytes);
  };
  RETURN_IF_ERROR(fit(kXRole, &s->x, row_bytes + guard));
  RETURN_IF_ERROR(fit(kRRole, &s->r, row_bytes + guard));
  if (!w->in_place) RETURN_IF_ERROR(fit(kOutRole, &s->out, row_bytes + guard));
  if (w->writes_residual && !w->in_place) {
    RETURN_IF_ERROR(fit(kResRole, &s->res, row_bytes + guard));
  }
  if (w->impl->needs_scratch) RETURN_IF_ERROR(fit(kScratchRole, &s->scratch, row_bytes));
  if (w->checks.on) {
    // Kept buffers hold what an earlier call left, and a fresh allocation may reuse memory
    // an earlier call freed: checked code (every submission, run only in its owner's tenant
    // host) starts from zeros in every byte of every buffer it is given, slack past its
    // tensor included. Inputs are copied in below, guards written after them, outputs
    // poisoned before each checked call. Before the result call, outside every window.
    for (DeviceBuffer* b : {&s->x, &s->r, &s->out, &s->res, &s->scratch}) {
      RETURN_IF_ERROR(Scrub(b, stream));
    }
  }
  KE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(s->x.get(), inputs.hidden_states, row_bytes, cudaMemcpyHostToDevice, stream));
  KE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(s->r.get(), inputs.residual, row_bytes, cudaMemcpyHostToDevice, stream));
  // Even the result call finds random bytes past its tensors, never another buffer.
  if (w->checks.on) RETURN_IF_ERROR(FillInputGuards(*s, w));
  return absl::OkStatus();
}

}  // namespace kerneleval::server
