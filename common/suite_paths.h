// Helpers shared by the suite reader (suite_json.cc), the suite rules (suite_rules.cc) and
// the workload helpers (workload_shape.cc): field paths for messages, and the names and
// ranges the format allows. Internal to common/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/bounded_text.h"
#include "common/suites.h"

namespace kerneleval::suite_internal {

inline constexpr char kOpType[] = "fused_add_rmsnorm";
inline constexpr std::size_t kMaxNameLength = 128;

// "a" + "b" -> "a.b"; "" + "b" -> "b"; "a" + "[2]" -> "a[2]".
inline std::string Join(absl::string_view path, absl::string_view child) {
  if (path.empty()) return std::string(child);
  if (!child.empty() && child.front() == '[') return absl::StrCat(path, child);
  return absl::StrCat(path, ".", child);
}

inline std::string Index(absl::string_view path, std::size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

// A key of the client's text as a path element: as it is when short, bounded when long.
inline std::string EchoKey(const std::string& key) {
  return key.size() <= kMaxEchoedChars ? key : Quote(key);
}

inline absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(path.empty() ? std::string(what)
                                                 : absl::StrCat(path, ": ", what));
}

inline bool IsValidSuiteName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

inline bool IsKnownAxis(absl::string_view name) {
  return name == kBatchAxis || name == kHiddenAxis;
}

inline std::string RangeText() { return absl::StrCat("1..", kMaxAxisValue); }

inline const v1::Axis* FindAxis(const v1::SuiteDefinition& suite, absl::string_view name) {
  for (const v1::Axis& axis : suite.axes()) {
    if (axis.name() == name) return &axis;
  }
  return nullptr;
}

}  // namespace kerneleval::suite_internal
