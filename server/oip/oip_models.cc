#include "server/oip/oip_models.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"

namespace kerneleval::server::oip {

std::vector<Model> ListModels(const ServiceState& state) {
  std::vector<Model> models{{kOperation, "", ""}};
  for (const auto& w : state.devices->workers()) {
    for (const v1::Implementation& impl : w->backend().Implementations()) {
      if (IsSubmissionId(impl.name())) continue;  // its owner's alone, never a model
      const std::string name = absl::StrCat(kOperation, ".", impl.name());
      const bool seen =
          std::any_of(models.begin(), models.end(), [&](const Model& m) { return m.name == name; });
      if (!seen) models.push_back({name, impl.name(), impl.device_kind()});
    }
  }
  return models;
}

absl::StatusOr<Model> FindModel(const ServiceState& state, const std::string& name,
                                const std::string& version, const char* name_field,
                                const char* version_field) {
  const std::vector<Model> models = ListModels(state);
  const auto it =
      std::find_if(models.begin(), models.end(), [&](const Model& m) { return m.name == name; });
  if (it == models.end()) {
    std::vector<std::string> names;
    for (const Model& m : models) names.push_back(m.name);
    return absl::NotFoundError(absl::StrCat(name_field, ": no model ", Quote(name),
                                            " on this server (models: ", absl::StrJoin(names, ", "),
                                            ")"));
  }
  if (!version.empty() && version != kModelVersion) {
    return absl::NotFoundError(absl::StrCat(version_field, ": model ", name, " has no version ",
                                            Quote(version), " (versions: ", kModelVersion, ")"));
  }
  return *it;
}

bool ModelReady(const ServiceState& state, const Model& model) {
  if (!state.ready.load() || state.draining.load()) return false;
  for (const auto& w : state.devices->workers()) {
    const Backend& b = w->backend();
    if (b.Healthy() &&
        (model.implementation.empty() || b.HasImplementation(model.implementation))) {
      return true;
    }
  }
  return false;
}

}  // namespace kerneleval::server::oip
