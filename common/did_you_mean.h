// "did you mean" for a mistyped name: the nearest of the names a field accepts, by edit
// distance (Levenshtein, ASCII case folded), when it is near enough to be a typo.
// Header-only and pure.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/bounded_text.h"

namespace kerneleval {

inline std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      const std::size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

// " (did you mean 'cpu_fused'?)" for the nearest candidate within a third of its length
// (at least 2 edits), "" when none is that near. Long input is not compared: it is no typo.
inline std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  if (name.empty() || name.size() > 256) return "";
  const std::string* best = nullptr;
  std::size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const std::size_t d = EditDistance(name, c);
    const std::size_t allowed = std::max<std::size_t>(2, c.size() / 3);
    if (d <= allowed && (best == nullptr || d < best_distance)) {
      best = &c;
      best_distance = d;
    }
  }
  if (best == nullptr) return "";
  return " (did you mean " + Quote(*best) + "?)";
}

}  // namespace kerneleval
