// ModelInfer <-> Run: the Open Inference Protocol's tensors and parameters as a
// kerneleval.v1.RunRequest, and the RunResponse as a ModelInferResponse. Pure translation:
// no gRPC, no devices; the evaluation itself is StartRun's (server/core/run_call.h).
//
// Request (model "fused_add_rmsnorm[.<implementation>]"):
//   inputs      hidden_states [B, H], residual [B, H], weight [H]; BF16, FP16 or FP32 (one
//               dtype for all three); raw_input_contents, or contents.fp32_contents for FP32
//   parameters  eps (number), mode ("output" | "output_and_residual" | "in_place"),
//               device ("cpu", "cuda:0", ...), check_correctness (bool), warmup and
//               repetitions (integers), timer ("cupti" | "cuda_events" | "host_clock"),
//               timeout (microseconds, Triton's; tightens the call's deadline), priority
//               (accepted and ignored: each device runs its queue in order)
//   outputs     output [B, H], and residual_out [B, H] in the modes that write it; empty =
//               every output the mode writes
// Response: outputs as raw_output_contents; latency, bandwidth, SOL and correctness as
// response parameters (README.md, "Open Inference Protocol").
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "kserve/v2/grpc_predict_v2.pb.h"
#include "server/oip/oip_models.h"

namespace kerneleval::server::oip {

struct InferPlan {
  v1::RunRequest run;
  std::vector<std::string> outputs;      // the outputs to return, in order
  std::chrono::microseconds timeout{0};  // 0: none
};

// Builds the Run for `model` from `request`, moving the tensor bytes out of the request (no
// copy of raw contents). INVALID_ARGUMENT naming the field for anything the model cannot
// take; the RunRequest's own rules (shapes, sizes, eps) are checked later by StartRun.
absl::StatusOr<InferPlan> TranslateRequest(const Model& model,
                                           inference::ModelInferRequest* request);

// Fills `response` for `request` from the Run's answer, moving the output bytes out of `run`.
void TranslateResponse(const inference::ModelInferRequest& request, const InferPlan& plan,
                       v1::RunResponse* run, inference::ModelInferResponse* response);

// The protocol's names for the three dtypes: "BF16", "FP16", "FP32".
std::string DatatypeName(v1::DType dtype);

}  // namespace kerneleval::server::oip
