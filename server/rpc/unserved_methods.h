// Methods this server does not serve, answered with a sentence: gRPC's own answer to an
// unknown method is UNIMPLEMENTED with no message. Clients such as tritonclient call
// GRPCInferenceService methods beyond the Open Inference Protocol's six; each gets what to
// use instead. Registered as the server's generic service, it sees only methods no
// registered service has. Header-only.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "common/bounded_text.h"

namespace kerneleval::server {

// What to use instead of `method` ("/package.Service/Method").
inline std::string UnservedMethodMessage(std::string_view method) {
  constexpr std::string_view kOip = "/inference.GRPCInferenceService/";
  if (method.substr(0, kOip.size()) == kOip) {
    const std::string_view name = method.substr(kOip.size());
    std::string instead;
    if (name == "ModelStreamInfer") {
      instead = "streaming inference is not served; call ModelInfer once per request";
    } else if (name == "ModelConfig") {
      instead =
          "model configuration is not served; ModelMetadata gives each model's inputs, "
          "outputs and datatypes";
    } else if (name == "ModelStatistics") {
      instead =
          "statistics are not served here; the server's Prometheus metrics "
          "(--metrics-listen, /metrics) carry them";
    } else if (name == "RepositoryIndex") {
      instead =
          "the models are the implementations: kerneleval.v1.KernelEval/"
          "ListImplementations (`kerneleval implementations`) lists them";
    } else if (name == "RepositoryModelLoad" || name == "RepositoryModelUnload") {
      instead =
          "models are built in or registered as submissions (kerneleval.v1.Submissions, "
          "`kerneleval submit`); there is nothing to load or unload";
    } else if (name.find("SharedMemory") != std::string_view::npos) {
      instead =
          "shared-memory tensors are not supported; send tensors in the request "
          "(raw_input_contents)";
    } else {
      instead =
          "this server serves ServerLive, ServerReady, ModelReady, ServerMetadata, "
          "ModelMetadata and ModelInfer of the Open Inference Protocol";
    }
    return "inference.GRPCInferenceService/" + Quote(name) + ": " + instead;
  }
  return Quote(method) +
         " is not a method of this server: it serves kerneleval.v1.KernelEval, "
         "kerneleval.v1.Results, kerneleval.v1.Submissions, inference.GRPCInferenceService and "
         "grpc.health.v1.Health (`kerneleval services` lists them)";
}

class UnservedMethods final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new Answer(context->method());
  }

 private:
  // Finishes at once; the request, if any, is never read.
  class Answer final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Answer(const std::string& method) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, UnservedMethodMessage(method)));
    }
    void OnDone() override { delete this; }
  };
};

}  // namespace kerneleval::server
