// The HTML report: one page with inline CSS and an inline SVG chart, so it can be mailed,
// archived as a CI artifact or opened offline.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report_format.h"
#include "client/report_html_profile.h"
#include "client/report_internal.h"
#include "client/tensors.h"
#include "client/text_table.h"
#include "common/enum_names.h"
#include "common/preferred_sol.h"
#include "common/protocol.h"

namespace kerneleval::client {
namespace {

using namespace report_internal;  // NOLINT

constexpr char kMicro[] = "\xC2\xB5s";  // UTF-8 "µs".

std::string Escape(const std::string& text) { return HtmlEscape(text); }

std::string Cell(const std::string& text, const char* tag = "td", const char* cls = nullptr) {
  return absl::StrCat("<", tag, cls ? absl::StrCat(" class=\"", cls, "\"") : "", ">", Escape(text),
                      "</", tag, ">");
}

std::string HeaderRow(const std::vector<std::string>& columns) {
  std::string out = "<tr>";
  for (const std::string& c : columns) out += Cell(c, "th");
  return out + "</tr>\n";
}

// Axis values as the seed's chart labels them: 1024, 2048, 4096, 8k, 16k, 32k.
std::string AxisLabel(int64_t value) {
  if (value >= 8192 && value % 1024 == 0) return absl::StrCat(value / 1024, "k");
  return std::to_string(value);
}

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (axis value, median seconds), by axis.
};

std::vector<Series> BuildSeries(const v1::BenchmarkReport& report, const std::string& axis) {
  const bool multi_device = MultiDevice(report);
  std::vector<Series> series;
  std::map<std::string, size_t> index;
  for (const v1::WorkloadResult& r : report.results()) {
    const std::string name =
        multi_device ? absl::StrCat(r.implementation(), " @ ", r.device()) : r.implementation();
    auto [it, inserted] = index.emplace(name, series.size());
    if (inserted) series.push_back({name, {}});
    const int64_t x = AxisValue(report, r, axis);
    const double y = r.latency().median_seconds();
    if (x > 0 && y > 0) series[it->second].points.emplace_back(static_cast<double>(x), y);
  }
  for (Series& s : series) std::sort(s.points.begin(), s.points.end());
  return series;
}

// Log-log chart of median latency against `axis`, one polyline per series.
std::string Chart(const v1::BenchmarkReport& report, const std::string& axis) {
  const std::vector<Series> series = BuildSeries(report, axis);
  std::set<double> xs;
  double y_min = INFINITY, y_max = 0;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      xs.insert(x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  }
  if (xs.empty()) return "<p>No latencies to plot.</p>\n";

  constexpr double kWidth = 760, kHeight = 420, kLeft = 80, kRight = 180, kTop = 20, kBottom = 50;
  const double lx0 = std::log10(*xs.begin()), lx1 = std::log10(*xs.rbegin());
  // Whole decades around the data, so gridlines land on 1, 10, 100 us ...
  const double ly0 = std::floor(std::log10(y_min)), ly1 = std::ceil(std::log10(y_max) + 1e-9);
  const double x_span = lx1 > lx0 ? lx1 - lx0 : 1, y_span = ly1 > ly0 ? ly1 - ly0 : 1;
  auto px = [&](double x) {
    const double t = lx1 > lx0 ? (std::log10(x) - lx0) / x_span : 0.5;
    return kLeft + t * (kWidth - kLeft - kRight);
  };
  auto py = [&](double y) {
    return kHeight - kBottom - (std::log10(y) - ly0) / y_span * (kHeight - kTop - kBottom);
  };

  std::string svg = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", kWidth,
                                 " ", kHeight, "\" width=\"", kWidth, "\" height=\"", kHeight,
                                 "\" role=\"img\" aria-label=\"median "
                                 "latency against ",
                                 Escape(axis), ", log-log\">\n");
  for (double decade = ly0; decade <= ly1 + 1e-9; decade += 1) {
    const double y = py(std::pow(10.0, decade));
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", kLeft, "\" x2=\"", kWidth - kRight,
                    "\" y1=\"", y, "\" y2=\"", y, "\"/><text class=\"tick\" x=\"", kLeft - 6,
                    "\" y=\"", y + 4, "\" text-anchor=\"end\">",
                    Escape(FormatSeconds(std::pow(10.0, decade), kMicro)), "</text>\n");
  }
  for (double x : xs) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", px(x), "\" x2=\"", px(x), "\" y1=\"", kTop,
                    "\" y2=\"", kHeight - kBottom, "\"/><text class=\"tick\" x=\"", px(x),
                    "\" y=\"", kHeight - kBottom + 16, "\" text-anchor=\"middle\">",
                    AxisLabel(static_cast<int64_t>(x)), "</text>\n");
  }
  absl::StrAppend(&svg, "<text class=\"label\" x=\"", (kLeft + kWidth - kRight) / 2, "\" y=\"",
                  kHeight - 10, "\" text-anchor=\"middle\">", Escape(axis), " &#8594;</text>\n");
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const char* color = kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
    std::string points;
    std::string markers;
    for (const auto& [x, y] : s.points) {
      absl::StrAppend(&points, points.empty() ? "" : " ", px(x), ",", py(y));
      absl::StrAppend(&markers, "<circle cx=\"", px(x), "\" cy=\"", py(y), "\" r=\"3\" fill=\"",
                      color, "\"><title>", Escape(s.name), ": ", Escape(axis), "=",
                      static_cast<int64_t>(x), ", ", Escape(FormatSeconds(y, kMicro)),
                      "</title></circle>");
    }
    absl::StrAppend(&svg, "<polyline fill=\"none\" stroke=\"", color,
                    "\" stroke-width=\"2\" points=\"", points, "\"><title>", Escape(s.name),
                    "</title></polyline>", markers, "\n");
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    absl::StrAppend(&svg, "<rect x=\"", kWidth - kRight + 16, "\" y=\"", ly - 8,
                    "\" width=\"12\" height=\"4\" fill=\"", color, "\"/><text x=\"",
                    kWidth - kRight + 34, "\" y=\"", ly, "\">", Escape(s.name), "</text>\n");
  }
  return svg + "</svg>\n";
}

constexpr char kStyle[] = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .25em .7em; border-bottom: 1px solid #ddd; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
td.pass { color: #1a7f37; } td.fail { color: #cf222e; font-weight: bold; }
.note { color: #666; font-size: .9em; }
svg text { font: 11px sans-serif; fill: #333; } svg .grid { stroke: #e4e4e4; }
svg .label { font-size: 12px; }
)css";

std::string WorkloadTables(const v1::BenchmarkReport& report) {
  const bool multi_device = MultiDevice(report);
  std::string out;
  for (const WorkloadGroup& group : GroupByWorkload(report)) {
    absl::StrAppend(&out, "<h2>Workload ", Escape(group.name), "</h2>\n<table>\n");
    std::vector<std::string> header = {"#", "implementation"};
    if (multi_device) header.push_back("device");
    for (const char* c : {"median", "mean", "min", "p99", "GB/s", "SOL %", "vs #1", "correctness",
                          "measured as", "SM clock", "DRAM bytes", "flags"}) {
      header.push_back(c);
    }
    out += HeaderRow(header);
    for (const v1::WorkloadResult* r : group.results) {
      const v1::LatencyStats& l = r->latency();
      const double sol = SolPercent(r->sol());
      const std::string correctness = CorrectnessText(*r);
      const bool bad = r->status() == v1::RESULT_STATUS_INCORRECT ||
                       r->status() == v1::RESULT_STATUS_RUNTIME_ERROR ||
                       r->status() == v1::RESULT_STATUS_REJECTED ||
                       (r->correctness().checked() && !r->correctness().passed());
      out += "<tr>" + Cell(RankText(r->rank())) + Cell(r->implementation(), "td", "l");
      if (multi_device) out += Cell(r->device(), "td", "l");
      for (double s : {l.median_seconds(), l.mean_seconds(), l.min_seconds(), l.p99_seconds()}) {
        out += Cell(FormatSeconds(s, kMicro));
      }
      out += Cell(r->bytes_per_second() > 0 ? Fixed(r->bytes_per_second() / 1e9, 1) : "-");
      out += Cell(sol < 0 ? "-" : Fixed(sol, 1));
      out += Cell(VsBestText(r->vs_best()));
      out += Cell(r->error().empty() ? correctness : correctness + ": " + r->error(), "td",
                  bad ? "fail" : "pass");
      const std::string dram = DramText(r->dram());
      std::vector<std::string> flag_list(r->integrity_flags().begin(), r->integrity_flags().end());
      if (const v1::SolFigure* sol = PreferredSol(r->sol()); sol != nullptr && sol->above_peak()) {
        flag_list.push_back("SOL above 100 %: " + sol->above_peak_reason());
      }
      const std::string flags = absl::StrJoin(flag_list, "; ");
      out += Cell(MeasuredAsText(report, *r), "td", "l") +
             Cell(ClockSummaryText(r->clocks()), "td", "l") +
             Cell(dram.empty() ? "-" : dram, "td", "l") +
             Cell(flags.empty() ? "-" : flags, "td", flags.empty() ? "l" : "fail") + "</tr>\n";
    }
    out += "</table>\n";
    for (const v1::WorkloadResult* r : group.results) out += ProfileHtml(*r);
  }
  return out;
}

// The peak each device's summary SOL % is against (its results' first figure, as the
// summaries' geomean takes it): "cpu: 9.29 GB/s (measured_copy)", devices in report order.
std::string SummaryPeaks(const v1::BenchmarkReport& report) {
  std::vector<std::string> devices, peaks;
  for (const v1::WorkloadResult& r : report.results()) {
    if (r.sol_size() == 0 ||
        std::find(devices.begin(), devices.end(), r.device()) != devices.end()) {
      continue;
    }
    devices.push_back(r.device());
    peaks.push_back(absl::StrCat(r.device(), ": ",
                                 FormatBandwidth(r.sol(0).peak_bytes_per_second()), " (",
                                 PeakSourceShortName(r.sol(0).source()), ")"));
  }
  return peaks.empty() ? "no peak known" : absl::StrJoin(peaks, ", ");
}

std::string SummaryTable(const v1::BenchmarkReport& report) {
  if (report.summaries_size() == 0) return "";
  std::string out = "<h2>Implementations</h2>\n<table>\n" +
                    HeaderRow({"#", "implementation", "device", "mean latency", "geomean SOL %",
                               "vs #1", "passed", "failed"});
  for (const v1::ImplementationSummary& s : report.summaries()) {
    out += "<tr>" + Cell(RankText(s.rank())) + Cell(s.implementation(), "td", "l") +
           Cell(s.device(), "td", "l") + Cell(FormatSeconds(s.mean_latency_seconds(), kMicro)) +
           Cell(s.geomean_sol_ratio() > 0 ? Fixed(100 * s.geomean_sol_ratio(), 1) : "-") +
           Cell(VsBestText(s.vs_best())) + Cell(std::to_string(s.passed())) +
           Cell(std::to_string(s.failed())) + "</tr>\n";
  }
  return out +
         "</table>\n<p class=\"note\">Mean latency: mean of per-workload medians. SOL % "
         "against the peak bandwidth " +
         Escape(SummaryPeaks(report)) + ".</p>\n";
}

std::string EnvironmentTables(const v1::BenchmarkReport& report) {
  std::string out;
  for (const v1::Environment& env : report.environments()) {
    const v1::Device& d = env.device();
    auto row = [](const std::string& k, const std::string& v) {
      return "<tr>" + Cell(k, "th", "l") + Cell(v, "td", "l") + "</tr>\n";
    };
    auto clocks = [](const v1::Clocks& c) {
      return absl::StrCat("SM ", c.sm_mhz(), " MHz, memory ", c.memory_mhz(), " MHz, ",
                          c.temperature_c(), " C, ", Fixed(c.power_watts(), 0), " W");
    };
    absl::StrAppend(
        &out, "<h2>Environment ", Escape(d.name()), "</h2>\n<table>\n", row("model", d.model()),
        row("uuid", d.uuid()),
        row("peak bandwidth",
            absl::StrCat(FormatBandwidth(d.peak_bytes_per_second()), " (device attributes), ",
                         FormatBandwidth(d.datasheet_bytes_per_second()), " (datasheet), ",
                         FormatBandwidth(d.measured_copy_bytes_per_second()),
                         " (measured copy, at server start)")),
        row("driver", env.driver_version()), row("CUDA", env.cuda_runtime_version()));
    if (env.clocks_available()) {
      absl::StrAppend(&out, row("clocks before", clocks(env.clocks_before())),
                      row("clocks after", clocks(env.clocks_after())),
                      row("clocks during", ClockSummaryText(env.clocks_during())),
                      row("throttled", env.throttled() ? "YES" : "no"));
    } else {
      out += row("clocks", "not available");
    }
    absl::StrAppend(&out, row("server", env.server_version() + " (git " + env.git_revision() + ")"),
                    row("host", env.hostname()), row("timestamp", env.timestamp()),
                    row("CUPTI", env.cupti_status()), row("host wait", HostWaitText(env)),
                    "</table>\n");
  }
  return out;
}

}  // namespace

std::string FormatReportHtml(const v1::BenchmarkReport& report) {
  const std::string title =
      absl::StrCat("kerneleval: ", report.suite().empty() ? "custom suite" : report.suite());
  std::string out =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                   Escape(title), "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n<h1>",
                   Escape(title), "</h1>\n");
  if (!report.definition().description().empty()) {
    absl::StrAppend(&out, "<p>", Escape(report.definition().description()), "</p>\n");
  }
  // The run id ties a saved report to the stored run (`kerneleval history --run ID`).
  const std::string run = report.run_id().empty()
                              ? std::string("Not stored (the server keeps no results store). ")
                              : absl::StrCat("Run ", Escape(report.run_id()), ". ");
  absl::StrAppend(&out, "<p class=\"note\">", run,
                  "Protocol: ", Escape(ProtocolText(report.protocol())), ". Wall time ",
                  Fixed(report.wall_seconds(), 2), " s.",
                  report.complete() ? "" : " <b>Incomplete: the run was cut short.</b>", "</p>\n");
  const std::string axis = PlotAxis(report);
  if (!axis.empty()) {
    absl::StrAppend(&out, "<h2>Scaling by ", Escape(axis), "</h2>\n", Chart(report, axis),
                    "<p class=\"note\">Median latency per workload, log scale on both axes.</p>\n");
  }
  absl::StrAppend(&out, SummaryTable(report), WorkloadTables(report), EnvironmentTables(report),
                  "</body>\n</html>\n");
  return out;
}

}  // namespace kerneleval::client
