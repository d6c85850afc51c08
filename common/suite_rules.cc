// The rules every suite obeys, from a file or a request (ValidateSuite).
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
#include "common/status_macros.h"
#include "common/suite_paths.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {
using namespace suite_internal;  // NOLINT: this file is one of the suite helpers' users
namespace {

// The suite-wide fields: name, dtype, mode and eps. Returns the dtype, which the workloads'
// size check needs.
absl::StatusOr<DType> ValidateSuiteFields(const v1::SuiteDefinition& suite,
                                          absl::string_view field) {
  if (!suite.name().empty() && !IsValidSuiteName(suite.name())) {
    return Invalid(Join(field, "name"),
                   absl::StrCat("must be 1..", kMaxNameLength,
                                " characters of [A-Za-z0-9_.-], got ", Quote(suite.name())));
  }
  const absl::StatusOr<DType> dtype = DTypeFromProto(suite.dtype(), Join(field, "dtype"));
  if (!dtype.ok()) return dtype.status();
  if (!v1::Mode_IsValid(suite.mode())) {
    return Invalid(Join(field, "mode"),
                   absl::StrCat("unknown mode ", static_cast<int>(suite.mode())));
  }
  // The kernels compute in fp32: an eps that rounds to 0 or overflows there is refused too.
  if (!std::isfinite(suite.eps()) || suite.eps() < 0 ||
      (suite.eps() > 0 &&
       !(static_cast<float>(suite.eps()) > 0 && std::isfinite(static_cast<float>(suite.eps()))))) {
    return Invalid(Join(field, "eps"), absl::StrCat("must be finite and > 0 (0 = default ",
                                                    kDefaultEps, "), got ", suite.eps()));
  }
  return dtype;
}

// Each of the operation's axes declared once, const ones with a value in range.
absl::Status ValidateSuiteAxes(const v1::SuiteDefinition& suite, absl::string_view field) {
  const std::string axes_path = Join(field, "axes");
  std::set<std::string> seen_axes;
  for (int i = 0; i < suite.axes_size(); ++i) {
    const v1::Axis& axis = suite.axes(i);
    const std::string path = Index(axes_path, i);
    if (!IsKnownAxis(axis.name())) {
      return Invalid(path, absl::StrCat("unknown axis ", Quote(axis.name()), "; the operation has ",
                                        kBatchAxis, " and ", kHiddenAxis));
    }
    if (!seen_axes.insert(axis.name()).second) {
      return Invalid(path, absl::StrCat("duplicate axis ", axis.name()));
    }
    if (axis.is_const() && (axis.value() < 1 || axis.value() > kMaxAxisValue)) {
      return Invalid(Join(path, "value"), absl::StrCat(axis.name(), " must be in ", RangeText(),
                                                       ", got ", axis.value()));
    }
    if (!axis.is_const() && axis.value() != 0) {
      return Invalid(
          Join(path, "value"),
          absl::StrCat(axis.name(), " is a var axis: its value comes from each workload, got ",
                       axis.value()));
    }
  }
  for (const char* name : {kBatchAxis, kHiddenAxis}) {
    if (seen_axes.count(name) == 0) return Invalid(axes_path, absl::StrCat("missing axis ", name));
  }
  return absl::OkStatus();
}

absl::Status ValidateWorkloadCount(const v1::SuiteDefinition& suite,
                                   absl::string_view workloads_path) {
  if (suite.workloads_size() == 0) {
    return Invalid(workloads_path, "at least one workload is required");
  }
  if (suite.workloads_size() > kMaxWorkloads) {
    return Invalid(workloads_path, absl::StrCat("at most ", kMaxWorkloads, " workloads, got ",
                                                suite.workloads_size()));
  }
  return absl::OkStatus();
}

// A workload sets exactly the suite's var axes, each within range.
absl::Status ValidateWorkloadAxes(const v1::SuiteDefinition& suite, const v1::Workload& workload,
                                  absl::string_view path) {
  const std::string path_axes = Join(path, "axes");
  // Sorted, so that the message does not depend on the map's iteration order.
  std::map<std::string, std::int64_t> axes(workload.axes().begin(), workload.axes().end());
  for (const auto& [name, value] : axes) {
    const std::string axis_path = Join(path_axes, EchoKey(name));
    const v1::Axis* axis = FindAxis(suite, name);
    if (axis == nullptr) {
      return Invalid(axis_path, absl::StrCat("unknown axis; the suite's axes are ", kBatchAxis,
                                             " and ", kHiddenAxis));
    }
    if (axis->is_const()) {
      return Invalid(axis_path, absl::StrCat(name, " is a const axis (", axis->value(),
                                             "); a workload sets only var axes"));
    }
    if (value < 1 || value > kMaxAxisValue) {
      return Invalid(axis_path,
                     absl::StrCat("must be an integer in ", RangeText(), ", got ", value));
    }
  }
  for (const v1::Axis& axis : suite.axes()) {
    if (!axis.is_const() && axes.count(axis.name()) == 0) {
      return Invalid(path_axes, absl::StrCat("missing var axis ", axis.name()));
    }
  }
  return absl::OkStatus();
}

// The bytes a workload moves must fit in 64 bits, so that every later size sum is exact.
absl::Status ValidateWorkloadSize(const v1::SuiteDefinition& suite, const v1::Workload& workload,
                                  DType dtype, absl::string_view path) {
  const bool writes_residual =
      suite.mode() == v1::MODE_OUTPUT_AND_RESIDUAL || suite.mode() == v1::MODE_IN_PLACE;
  absl::StatusOr<WorkloadShape> shape = ResolveShape(suite, workload);
  if (!shape.ok()) return Invalid(path, shape.status().message());
  // Both sides are below 2^31, so tensors * batch * hidden + hidden stays below 2^64.
  const std::uint64_t elements = (writes_residual ? 4u : 3u) *
                                     static_cast<std::uint64_t>(shape->batch) *
                                     static_cast<std::uint64_t>(shape->hidden) +
                                 static_cast<std::uint64_t>(shape->hidden);
  if (elements >
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ElementSize(dtype)) {
    return Invalid(
        path, absl::StrCat(kBatchAxis, " ", shape->batch, " x ", kHiddenAxis, " ", shape->hidden,
                           " is too large: the bytes moved overflow 64 bits"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTolerance(const v1::Tolerance& tol, absl::string_view tol_path) {
  for (const auto& [key, value] :
       {std::pair<const char*, double>{"atol", tol.atol()}, {"rtol", tol.rtol()}}) {
    if (!std::isfinite(value) || value < 0) {
      return Invalid(Join(tol_path, key), absl::StrCat("must be finite and >= 0, got ", value));
    }
  }
  if (!(tol.required_matched_ratio() >= 0 && tol.required_matched_ratio() <= 1)) {
    return Invalid(Join(tol_path, "required_matched_ratio"),
                   absl::StrCat("must be in [0, 1], got ", tol.required_matched_ratio()));
  }
  return absl::OkStatus();
}

// A workload's name (given or generated) is bounded and unique; `names` maps the names seen
// so far to their workload's index.
absl::Status ValidateWorkloadName(const v1::SuiteDefinition& suite, int i,
                                  absl::string_view workloads_path,
                                  std::map<std::string, int>* names) {
  const std::string path = Index(workloads_path, i);
  const std::string name = WorkloadName(suite, suite.workloads(i));
  if (name.size() > kMaxNameLength) {
    return Invalid(Join(path, "name"),
                   absl::StrCat("at most ", kMaxNameLength, " characters, got ", name.size()));
  }
  auto [previous, inserted] = names->emplace(name, i);
  if (!inserted) {
    return Invalid(Join(path, "name"),
                   absl::StrCat("duplicate workload name ", Quote(name), " (also ",
                                Index(workloads_path, previous->second), ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateWorkloads(const v1::SuiteDefinition& suite, DType dtype,
                               absl::string_view field) {
  const std::string workloads_path = Join(field, "workloads");
  RETURN_IF_ERROR(ValidateWorkloadCount(suite, workloads_path));
  std::map<std::string, int> names;  // workload name -> index
  for (int i = 0; i < suite.workloads_size(); ++i) {
    const v1::Workload& workload = suite.workloads(i);
    const std::string path = Index(workloads_path, i);
    RETURN_IF_ERROR(ValidateWorkloadAxes(suite, workload, path));
    RETURN_IF_ERROR(ValidateWorkloadSize(suite, workload, dtype, path));
    RETURN_IF_ERROR(ValidateTolerance(workload.tolerance(), Join(path, "tolerance")));
    RETURN_IF_ERROR(ValidateWorkloadName(suite, i, workloads_path, &names));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSuite(const v1::SuiteDefinition& suite, std::string_view field_name) {
  const absl::string_view field(field_name.data(), field_name.size());
  const absl::StatusOr<DType> dtype = ValidateSuiteFields(suite, field);
  if (!dtype.ok()) return dtype.status();
  RETURN_IF_ERROR(ValidateSuiteAxes(suite, field));
  return ValidateWorkloads(suite, *dtype, field);
}

}  // namespace kerneleval
