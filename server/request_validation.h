// Validation of every request field before any work is queued. Errors are
// INVALID_ARGUMENT naming the field (e.g. "residual.shape: [3, 7] does not match
// hidden_states.shape [3, 8]"), or RESOURCE_EXHAUSTED for a request over a server limit.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/backend.h"

namespace kerneleval::server {

struct RequestLimits {
  std::uint64_t max_tensor_bytes = std::uint64_t{1} << 30;
  std::int64_t max_batch = std::int64_t{1} << 24;
  std::int64_t max_hidden = std::int64_t{1} << 20;
  std::uint32_t max_repetitions = 10000;
  std::uint32_t max_warmup = 1000;
  std::uint32_t max_graph_calls = 1000;
  double max_benchmark_seconds = 3600;
};

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, const char* field);
v1::DType DTypeToProto(DType dtype);
absl::StatusOr<Mode> ModeFromProto(v1::Mode mode, const char* field);
v1::Mode ModeToProto(Mode mode);

// The problem a Run request describes, its tensors checked against each other.
absl::StatusOr<Problem> ValidateRunRequest(const v1::RunRequest& request,
                                           const RequestLimits& limits);

// A benchmark protocol with defaults filled in (warm-up 10, repetitions 50, cold, 20 calls
// per graph, seed 200), or an error naming the field under "protocol.".
absl::StatusOr<v1::Protocol> ResolveProtocol(const v1::Protocol& requested,
                                             const RequestLimits& limits);

// The backend's options for a resolved protocol.
MeasureOptions ToMeasureOptions(const v1::Protocol& protocol);

}  // namespace kerneleval::server
