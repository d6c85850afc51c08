// The Caller a job of a gRPC call runs for (admission.h), built one way for every front that
// queues device work (KernelEval's Run and Benchmark, OIP's ModelInfer): its owner from
// OwnerOfCall (server/identity/caller_identity.h), its deadline and its cancellation, so
// that each job is charged to and scoped by whoever made the call.
#pragma once

#include <grpcpp/server_context.h>

#include "server/core/admission.h"
#include "server/core/service_state.h"

namespace kerneleval::server {

// `context` must outlive every job the Caller is given to (gRPC keeps a call's context until
// the call is finished, and a call finishes only after its jobs have answered).
inline Caller CallerOf(const ServiceState& state, grpc::CallbackServerContext* context) {
  Caller caller;
  caller.owner = OwnerOfCall(state.identities, *context);
  caller.deadline = context->deadline();
  caller.cancelled = [context] { return context->IsCancelled(); };
  return caller;
}

}  // namespace kerneleval::server
