#include "server/store/sol_peaks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/preferred_sol.h"
#include "server/store/result_rows.h"

namespace kerneleval::server::store {
namespace {

std::string Rate(double bytes_per_second) {
  char text[48];
  if (bytes_per_second >= 1e12) {
    std::snprintf(text, sizeof(text), "%.2f TB/s", bytes_per_second / 1e12);
  } else {
    std::snprintf(text, sizeof(text), "%.2f GB/s", bytes_per_second / 1e9);
  }
  return text;
}

// The distinct peaks of `results`, in first-seen order.
void Collect(const std::vector<v1::StoredResult>& results, std::vector<SolPeak>* peaks) {
  for (const v1::StoredResult& s : results) {
    const SolPeak p = PeakOf(s.result());
    if (p.source == v1::PEAK_SOURCE_UNSPECIFIED) continue;
    bool seen = false;
    for (const SolPeak& q : *peaks) seen |= SamePeak(p, q);
    if (!seen) peaks->push_back(p);
  }
}

}  // namespace

SolPeak PeakOf(const v1::WorkloadResult& result) {
  const v1::SolFigure* sol = PreferredSol(result.sol());
  if (sol == nullptr) return {};
  return {sol->source(), sol->peak_bytes_per_second()};
}

bool SamePeak(const SolPeak& a, const SolPeak& b) {
  if (a.source != b.source) return false;
  const double scale = std::max(std::abs(a.bytes_per_second), std::abs(b.bytes_per_second));
  return std::abs(a.bytes_per_second - b.bytes_per_second) <= 1e-6 * scale;
}

std::string PeakText(const SolPeak& peak) {
  return absl::StrCat(Rate(peak.bytes_per_second), " (", PeakSourceShortName(peak.source), ")");
}

std::string PeakDifference(const std::vector<v1::StoredResult>& baseline,
                           const std::vector<v1::StoredResult>& candidate) {
  std::vector<SolPeak> peaks;
  Collect(baseline, &peaks);
  Collect(candidate, &peaks);
  if (peaks.size() < 2) return "";
  std::string text = "SOL peaks differ: ";
  for (std::size_t i = 0; i < peaks.size() && i < 4; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : " vs ", PeakText(peaks[i]));
  }
  if (peaks.size() > 4) absl::StrAppend(&text, " and ", peaks.size() - 4, " more");
  return absl::StrCat(text, ": compare times, not SOL %");
}

absl::Status FillStoredPeaks(Database* db) {
  auto rows = db->Query("SELECT id, result_json FROM results WHERE sol_peak_source = -1");
  if (!rows.ok()) return rows.status();
  for (const SqlRow& row : *rows) {
    v1::WorkloadResult r;
    // A row that does not parse keeps no peak (0): it is never on one scale with another.
    (void)FromJson(row[1].value_or("{}"), &r);
    const SolPeak p = PeakOf(r);
    auto updated = db->Query(
        "UPDATE results SET sol_peak_source = $1, sol_peak_bytes_per_second = $2 WHERE id = $3",
        {std::int64_t{p.source}, p.bytes_per_second, row[0].value_or("")});
    if (!updated.ok()) return updated.status();
  }
  return absl::OkStatus();
}

}  // namespace kerneleval::server::store
