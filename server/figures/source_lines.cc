#include "server/figures/source_lines.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace kerneleval::server {
namespace {

struct LineSums {
  std::uint64_t samples = 0;
  std::map<std::string, std::uint64_t> reasons;
};

double SharePct(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

void SumLines(const std::vector<SampledLine>& pcs, v1::SourceLines* out) {
  std::map<std::pair<std::string, std::uint32_t>, LineSums> by_line;
  std::uint64_t total = 0;
  for (const SampledLine& pc : pcs) {
    std::uint64_t samples = 0;
    for (const auto& [reason, n] : pc.reasons) samples += n;
    total += samples;
    if (pc.file.empty() || samples == 0) continue;
    LineSums& sums = by_line[{pc.file, pc.line}];
    sums.samples += samples;
    for (const auto& [reason, n] : pc.reasons) sums.reasons[reason] += n;
  }
  std::vector<std::pair<std::pair<std::string, std::uint32_t>, LineSums>> lines(by_line.begin(),
                                                                                by_line.end());
  // Most samples first; the map's order (file, line) breaks ties, kept by the stable sort.
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) {
    return a.second.samples > b.second.samples;
  });
  out->set_samples(total);
  out->clear_lines();
  for (std::size_t i = 0; i < lines.size() && i < static_cast<std::size_t>(kMaxSourceLines); ++i) {
    const auto& [where, sums] = lines[i];
    v1::SourceLine* line = out->add_lines();
    line->set_file(where.first);
    line->set_line(where.second);
    line->set_samples(sums.samples);
    line->set_share_pct(SharePct(sums.samples, total));
    std::vector<std::pair<std::string, std::uint64_t>> reasons(sums.reasons.begin(),
                                                               sums.reasons.end());
    std::stable_sort(reasons.begin(), reasons.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    for (std::size_t r = 0; r < reasons.size() && r < static_cast<std::size_t>(kMaxLineReasons);
         ++r) {
      v1::LineReason* reason = line->add_reasons();
      reason->set_reason(reasons[r].first);
      reason->set_samples(reasons[r].second);
    }
  }
}

std::string PcSamplingReasonName(const std::string& cupti_name) {
  if (absl::EndsWith(cupti_name, "_not_issued")) return "";
  for (const char* prefix : {"smsp__pcsamp_warps_issue_stalled_", "smsp__pcsamp_"}) {
    if (absl::StartsWith(cupti_name, prefix)) return cupti_name.substr(std::string(prefix).size());
  }
  return cupti_name;
}

std::vector<v1::ProfileAdvice> AdviseLines(const v1::SourceLines& lines) {
  std::vector<v1::ProfileAdvice> out;
  if (!lines.available() || lines.samples() == 0) return out;
  // The line with the most long_scoreboard samples.
  const v1::SourceLine* worst = nullptr;
  std::uint64_t worst_samples = 0;
  for (const v1::SourceLine& line : lines.lines()) {
    for (const v1::LineReason& reason : line.reasons()) {
      if (reason.reason() == "long_scoreboard" && reason.samples() > worst_samples) {
        worst = &line;
        worst_samples = reason.samples();
      }
    }
  }
  const double share = SharePct(worst_samples, lines.samples());
  if (worst == nullptr || share < 20) return out;
  v1::ProfileAdvice a;
  a.set_rule("waits_on_memory_at_line");
  a.set_text(absl::StrFormat(
      "%s of the kernel's warp samples wait on global memory (long_scoreboard) at %s:%u: the "
      "first use of a load made on or before that line; issue the row's loads earlier and "
      "together (all loads, then the arithmetic), or wider, so that fewer wait in turn",
      absl::StrFormat("%.0f%%", share), worst->file(), worst->line()));
  a.set_figure(
      absl::StrFormat("source_lines[%s:%u].long_scoreboard", worst->file(), worst->line()));
  a.set_value(share);
  out.push_back(std::move(a));
  return out;
}

}  // namespace kerneleval::server
