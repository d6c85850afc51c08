// The implementations as the Open Inference Protocol sees them: each is a model named
// "fused_add_rmsnorm.<implementation>", and "fused_add_rmsnorm" is each device's default.
// Models come and go with nothing: the set is the devices' implementations, read each time.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/core/service_state.h"

namespace kerneleval::server::oip {

inline constexpr char kOperation[] = "fused_add_rmsnorm";
// Models have one version; a request may name it or leave it empty.
inline constexpr char kModelVersion[] = "1";

// A model the server has: the implementation it runs ("" = the chosen device's default)
// and the kind of device that has it ("" for the default model).
struct Model {
  std::string name;
  std::string implementation;
  std::string device_kind;
};

// Every model, the default first, then each implementation once in device order.
std::vector<Model> ListModels(const ServiceState& state);

// The model `name` at `version`: NOT_FOUND naming `name_field` (and listing the models) or
// `version_field` otherwise.
absl::StatusOr<Model> FindModel(const ServiceState& state, const std::string& name,
                                const std::string& version, const char* name_field,
                                const char* version_field);

// Ready when the server is (the same flag as grpc.health.v1 "readiness") and a healthy
// device has the implementation.
bool ModelReady(const ServiceState& state, const Model& model);

}  // namespace kerneleval::server::oip
