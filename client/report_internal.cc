// The pieces the report formatters share (report_internal.h).
#include "client/report_internal.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/report_format.h"
#include "client/text_table.h"
#include "common/conversions.h"
#include "common/protocol.h"

namespace kerneleval::client {

namespace report_internal {

std::vector<WorkloadGroup> GroupByWorkload(const v1::BenchmarkReport& report) {
  std::vector<WorkloadGroup> groups;
  std::map<std::string, size_t> index;
  for (const v1::WorkloadResult& result : report.results()) {
    auto [it, inserted] = index.emplace(result.workload(), groups.size());
    if (inserted) groups.push_back({result.workload(), {}});
    groups[it->second].results.push_back(&result);
  }
  for (WorkloadGroup& group : groups) {
    std::stable_sort(group.results.begin(), group.results.end(),
                     [](const v1::WorkloadResult* a, const v1::WorkloadResult* b) {
                       // Rank 0 (unranked) sorts after every ranked result.
                       const uint32_t ra = a->rank() == 0 ? UINT32_MAX : a->rank();
                       const uint32_t rb = b->rank() == 0 ? UINT32_MAX : b->rank();
                       return ra < rb;
                     });
  }
  return groups;
}

int64_t AxisValue(const v1::BenchmarkReport& report, const v1::WorkloadResult& result,
                  const std::string& axis) {
  const auto it = result.axes().find(axis);
  if (it != result.axes().end()) return it->second;
  for (const v1::Axis& a : report.definition().axes()) {
    if (a.name() == axis && a.is_const()) return a.value();
  }
  return -1;
}

std::string PlotAxis(const v1::BenchmarkReport& report) {
  std::map<std::string, std::set<int64_t>> values;
  for (const v1::WorkloadResult& result : report.results()) {
    for (const auto& [name, value] : result.axes()) values[name].insert(value);
  }
  std::string best;
  size_t best_count = 0;
  for (const auto& [name, distinct] : values) {
    const bool better =
        distinct.size() > best_count || (distinct.size() == best_count && name == "batch_size");
    if (better) {
      best = name;
      best_count = distinct.size();
    }
  }
  return best;
}

bool MultiDevice(const v1::BenchmarkReport& report) {
  std::set<std::string> devices;
  for (const v1::WorkloadResult& result : report.results()) devices.insert(result.device());
  return devices.size() > 1;
}

std::string CorrectnessText(const v1::WorkloadResult& result) {
  // Statuses that end before a check print their name alone; a checked output prints the
  // status the check gave, with its error.
  switch (result.status()) {
    case v1::RESULT_STATUS_RUNTIME_ERROR:
    case v1::RESULT_STATUS_SKIPPED:
    case v1::RESULT_STATUS_REJECTED:
      return ResultStatusShortName(result.status());
    default:
      break;
  }
  const v1::Correctness& c = result.correctness();
  if (!c.checked()) return "unchecked";
  const std::string verdict =
      ResultStatusShortName(c.passed() ? v1::RESULT_STATUS_PASSED : v1::RESULT_STATUS_INCORRECT);
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%s %.1e", verdict.c_str(), c.max_abs_error());
  std::string text = buffer;
  if (c.has_nan()) text += " NaN";
  if (c.has_inf()) text += " Inf";
  return text;
}

double SolPercent(const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures) {
  const v1::SolFigure* sol = PreferredSol(figures);
  return sol == nullptr ? -1 : 100 * sol->sol_ratio();
}

std::string VsBestText(double vs_best) { return vs_best > 0 ? Fixed(vs_best, 2) + "x" : "-"; }

std::string RankText(uint32_t rank) { return rank == 0 ? "-" : std::to_string(rank); }

std::string FormatBandwidth(double bytes_per_second) {
  if (!(bytes_per_second > 0)) return "-";
  if (bytes_per_second >= 1e12) return Fixed(bytes_per_second / 1e12, 2) + " TB/s";
  return Fixed(bytes_per_second / 1e9, 1) + " GB/s";
}

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string MeasuredAsText(const v1::BenchmarkReport& report, const v1::WorkloadResult& result) {
  if (!result.measured_as().empty()) return result.measured_as();
  return absl::StrCat(TimerShortName(result.timer()), ", ", ProtocolShortText(report.protocol()));
}

std::string DramText(const v1::DramTraffic& d) {
  if (!d.available()) return d.unavailable_reason();
  std::string text =
      absl::StrCat("DRAM read ", Fixed(d.read_bytes() / 1e6, 2), " MB (declared ",
                   Fixed(static_cast<double>(d.declared_read_bytes()) / 1e6, 2), "), write ",
                   Fixed(d.write_bytes() / 1e6, 2), " MB (declared ",
                   Fixed(static_cast<double>(d.declared_write_bytes()) / 1e6, 2), ")");
  if (d.bytes_per_second() > 0) absl::StrAppend(&text, ", ", FormatBandwidth(d.bytes_per_second()));
  absl::StrAppend(&text, ", median of ", d.windows(), d.cold() ? " cold" : " hot", " windows");
  return text;
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ShortKernelName(const std::string& full) {
  // "void ns::(anonymous namespace)::AddKernel<bf16, 8>(const void*, ...)" reads as
  // "ns::AddKernel".
  std::string name = absl::StrReplaceAll(full, {{"(anonymous namespace)::", ""}});
  name = name.substr(0, name.find_first_of("<("));
  if (const std::size_t space = name.rfind(' '); space != std::string::npos) {
    name = name.substr(space + 1);
  }
  return name.empty() ? full : name;
}

std::string KernelsText(const google::protobuf::RepeatedPtrField<v1::KernelTiming>& kernels) {
  if (kernels.size() < 2) return "";
  std::vector<std::string> parts;
  for (const v1::KernelTiming& k : kernels) {
    if (k.has_gap_before()) {
      // In us whatever its size, and signed: kernels launched with PDL overlap.
      parts.push_back(absl::StrFormat("gap %.2f us", k.gap_before().median_seconds() * 1e6));
    }
    parts.push_back(
        absl::StrCat(ShortKernelName(k.name()), " ", FormatSeconds(k.duration().median_seconds())));
  }
  return absl::StrCat("kernels (medians): ", absl::StrJoin(parts, ", "));
}

std::string ClockSummaryText(const v1::ClockSummary& c) {
  if (c.samples() == 0) return "-";
  std::string text = absl::StrCat("SM ", Fixed(c.sm_mhz_mean(), 0), " MHz (", c.sm_mhz_min(), "-",
                                  c.sm_mhz_max(), "), memory ", c.memory_mhz_max(), " MHz");
  if (c.temperature_c_max() > 0) absl::StrAppend(&text, ", ", c.temperature_c_max(), " C");
  if (c.power_watts_max() > 0) absl::StrAppend(&text, ", ", Fixed(c.power_watts_max(), 0), " W");
  if (c.throttle_reason_names_size() > 0) {
    absl::StrAppend(&text, ", reasons: ", absl::StrJoin(c.throttle_reason_names(), "|"));
  }
  absl::StrAppend(&text, "; ", c.samples(), " readings");
  return text;
}

std::string ColdFlushText(const v1::Device& device) {
  if (device.cold_flush_bytes() == 0) return "";
  std::string text =
      absl::StrCat("reads ", FormatBytes(static_cast<double>(device.cold_flush_bytes())),
                   " (twice the ", FormatBytes(static_cast<double>(device.l2_cache_bytes())),
                   device.kind() == "cpu" ? " last-level cache" : " L2",
                   ") before each timed call, outside the timed window");
  if (device.cold_flush_seconds() > 0) {
    absl::StrAppend(&text, "; one read took ", FormatSeconds(device.cold_flush_seconds()));
  }
  return text;
}

std::string HostWaitText(const v1::Environment& env) {
  if (env.host_wait_seconds_size() == 0) return "-";
  double total = 0;
  for (double s : env.host_wait_seconds()) total += s;
  // The first workload has nothing to overlap with: what follows it says whether the
  // device waited.
  return absl::StrCat(Fixed(total, 3), " s for ", env.host_wait_seconds_size(), " workloads (",
                      Fixed(total - env.host_wait_seconds(0), 3), " s after the first), ",
                      env.workloads_prepared_ahead(), " prepared ahead");
}

}  // namespace report_internal

}  // namespace kerneleval::client
