#include "client/report_profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/report_internal.h"
#include "client/text_table.h"

namespace kerneleval::client::report_internal {

namespace {

constexpr int kStallsShown = 3;

std::string Dims(const google::protobuf::RepeatedField<std::uint32_t>& d) {
  return absl::StrJoin(d, "x");
}

std::string LaunchText(const v1::ProfiledLaunch& l) {
  std::string text = absl::StrCat("grid ", Dims(l.grid()), ", block ", Dims(l.block()), ", ",
                                  l.registers_per_thread(), " registers");
  const std::uint64_t shared = l.static_shared_bytes() + l.dynamic_shared_bytes();
  if (shared > 0) absl::StrAppend(&text, ", ", shared, " B shared");
  if (l.cluster_size() > 1) absl::StrAppend(&text, ", clusters of ", l.cluster_size());
  return text;
}

std::string Pct(double v) { return absl::StrFormat("%.0f%%", v); }

// The lines most warps were sampled at, each with its top reasons: "submission.cu:14 38%
// (long_scoreboard 30%, selected 6%)".
void AppendSourceLines(const v1::SourceLines& source, std::vector<std::string>* lines) {
  constexpr int kLinesShown = 5;
  if (!source.available()) {
    if (!source.unavailable_reason().empty()) {
      lines->push_back(absl::StrCat("  source lines: ", source.unavailable_reason()));
    }
    return;
  }
  lines->push_back(absl::StrFormat(
      "  source lines (%u warp samples over %u calls%s):", source.samples(), source.calls(),
      source.dropped_samples() > 0 ? absl::StrFormat(", %u dropped", source.dropped_samples())
                                   : ""));
  for (int i = 0; i < std::min(kLinesShown, source.lines_size()); ++i) {
    const v1::SourceLine& l = source.lines(i);
    std::vector<std::string> reasons;
    for (const v1::LineReason& r : l.reasons()) {
      reasons.push_back(
          absl::StrFormat("%s %s", r.reason(),
                          Pct(source.samples() > 0 ? 100.0 * r.samples() / source.samples() : 0)));
    }
    lines->push_back(absl::StrFormat("    %s:%u %s (%s)", l.file(), l.line(), Pct(l.share_pct()),
                                     absl::StrJoin(reasons, ", ")));
  }
}

}  // namespace

std::vector<std::string> ProfileLines(const v1::ProfileReport& p) {
  if (!p.available()) {
    return p.unavailable_reason().empty() ? std::vector<std::string>{}
                                          : std::vector<std::string>{p.unavailable_reason()};
  }
  std::vector<std::string> lines;
  for (const v1::KernelProfile& k : p.kernels()) {
    const std::string who = absl::StrCat("profile ", k.index(), " ", ShortKernelName(k.name()));
    lines.push_back(absl::StrCat(who, ": ", LaunchText(k.launch()), "; ",
                                 FormatSeconds(k.duration_seconds()), " under the profiler"));
    const v1::ProfileThroughput& t = k.throughput();
    const v1::ProfileMemory& m = k.memory();
    lines.push_back(absl::StrCat("  throughput: SM ", Pct(t.sm_pct()), ", memory ",
                                 Pct(t.memory_pct()), " (DRAM ", Pct(t.dram_pct()), ", L2 ",
                                 Pct(t.l2_pct()), ", L1 ", Pct(t.l1_pct()), ") of peak"));
    std::string memory = absl::StrFormat(
        "  memory: DRAM %.2f MB read, %.2f MB written; L2 hit %s; %.1f sectors per load "
        "request, %.1f per store",
        m.dram_read_bytes() / 1e6, m.dram_write_bytes() / 1e6, Pct(m.l2_hit_rate_pct()),
        m.load_sectors_per_request(), m.store_sectors_per_request());
    if (m.declared_read_bytes() > 0) {
      absl::StrAppend(&memory,
                      absl::StrFormat("; the call read %.2fx the %.2f MB the definition reads",
                                      m.dram_read_vs_declared(), m.declared_read_bytes() / 1e6));
    }
    if (m.declared_bytes() > 0) {
      absl::StrAppend(&memory, absl::StrFormat(" and moved %.2fx its %.2f MB", m.dram_vs_declared(),
                                               m.declared_bytes() / 1e6));
    }
    lines.push_back(memory);
    const v1::ProfileOccupancy& o = k.occupancy();
    lines.push_back(absl::StrFormat(
        "  occupancy: %s theoretical (%u blocks per SM%s), %s achieved, %.2f waves",
        Pct(o.theoretical_pct()), o.blocks_per_sm(),
        o.limited_by().empty() ? ""
                               : absl::StrCat(", limited by ", absl::StrJoin(o.limited_by(), ", ")),
        Pct(o.achieved_pct()), o.waves()));
    std::vector<std::string> stalls;
    for (int i = 0; i < std::min(kStallsShown, k.stalls_size()); ++i) {
      const v1::WarpStall& s = k.stalls(i);
      stalls.push_back(absl::StrFormat("%s %s (%.1f cycles per instruction)", s.reason(),
                                       Pct(s.share_pct()), s.cycles_per_instruction()));
    }
    if (!stalls.empty()) lines.push_back(absl::StrCat("  stalls: ", absl::StrJoin(stalls, ", ")));
    const v1::RooflinePoint& r = k.roofline();
    if (r.dram_bytes() > 0) {
      lines.push_back(absl::StrFormat(
          "  roofline: %.3g flop/B, %.3g GFLOP/s, %s-bound (ridge %.3g flop/B), %s of the roof "
          "at this intensity",
          r.arithmetic_intensity(), r.flops_per_second() / 1e9, r.bound(), r.ridge_point(),
          Pct(r.attainable_flops_per_second() > 0
                  ? 100 * r.flops_per_second() / r.attainable_flops_per_second()
                  : 0)));
    }
    AppendSourceLines(k.source_lines(), &lines);
    for (const v1::ProfileAdvice& a : k.advice()) {
      lines.push_back(absl::StrCat("  advice [", a.rule(), "]: ", a.text()));
    }
  }
  if (!p.source().empty()) lines.push_back(absl::StrCat("profile source: ", p.source()));
  return lines;
}

}  // namespace kerneleval::client::report_internal
