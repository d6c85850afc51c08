// A workload's tensor shape and its display name.
#include "common/suites.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/bounded_text.h"
#include "common/conversions.h"
#include "common/suite_paths.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {
using namespace suite_internal;  // NOLINT: this file is one of the suite helpers' users

absl::StatusOr<WorkloadShape> ResolveShape(const v1::SuiteDefinition& suite,
                                           const v1::Workload& workload) {
  std::int64_t values[2] = {0, 0};
  const char* names[2] = {kBatchAxis, kHiddenAxis};
  for (int k = 0; k < 2; ++k) {
    const v1::Axis* axis = FindAxis(suite, names[k]);
    if (axis == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("the suite has no axis ", names[k]));
    }
    if (axis->is_const()) {
      values[k] = axis->value();
    } else {
      const auto it = workload.axes().find(names[k]);
      if (it == workload.axes().end()) {
        return absl::InvalidArgumentError(absl::StrCat("missing var axis ", names[k]));
      }
      values[k] = it->second;
    }
    if (values[k] < 1 || values[k] > kMaxAxisValue) {
      return absl::InvalidArgumentError(
          absl::StrCat(names[k], " must be in ", RangeText(), ", got ", values[k]));
    }
  }
  return WorkloadShape{values[0], values[1]};
}

std::string WorkloadName(const v1::SuiteDefinition& suite, const v1::Workload& workload) {
  if (!workload.name().empty()) return workload.name();
  const bool any_var = std::any_of(suite.axes().begin(), suite.axes().end(),
                                   [](const v1::Axis& axis) { return !axis.is_const(); });
  std::vector<std::string> parts;
  for (const v1::Axis& axis : suite.axes()) {
    if (axis.is_const()) {
      if (!any_var) parts.push_back(absl::StrCat(axis.name(), "=", axis.value()));
      continue;
    }
    const auto it = workload.axes().find(axis.name());
    parts.push_back(it == workload.axes().end() ? absl::StrCat(axis.name(), "=?")
                                                : absl::StrCat(axis.name(), "=", it->second));
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace kerneleval
