// A Run from any front: admitted, validated, queued on a device, evaluated on the device's
// worker (server/evaluation/evaluation.h), answered. The KernelEval RPC and the Open Inference
// Protocol front both go through StartRun; what they add is only their own wire format.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/core/admission.h"
#include "server/core/service_state.h"

namespace kerneleval::server {

// Validates `request`, picks its device and queues it; the job fills `response`. `done` is
// called exactly once with the outcome: inline when the request is refused before it is
// queued, else on the device's worker thread. `request` and `response` must stay valid until
// `done` has been called.
void StartRun(ServiceState& state, Caller caller, const v1::RunRequest& request,
              v1::RunResponse* response, std::function<void(const absl::Status&)> done);

}  // namespace kerneleval::server
