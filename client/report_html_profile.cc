#include "client/report_html_profile.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report_internal.h"
#include "client/report_profile.h"

namespace kerneleval::client::report_internal {
namespace {

constexpr int kStallsDrawn = 8;

// An upper bound of a text's width in the report's 11 px sans-serif (svg text in
// report_html.cc): wide enough that no font a browser picks clips a label at the drawing's edge.
double TextWidthBound(std::string_view text) { return 7.0 * text.size(); }

// Horizontal bars, one per stall reason, as a share of the stalled cycles; the reasons on the
// left and the values on the right as wide as their longest text.
std::string StallBars(const v1::KernelProfile& k) {
  const int n = std::min(kStallsDrawn, k.stalls_size());
  if (n == 0) return "";
  constexpr double kBar = 300, kRow = 18, kGap = 6;
  std::vector<std::string> values;
  double label = 0, value = 0;
  for (int i = 0; i < n; ++i) {
    const v1::WarpStall& s = k.stalls(i);
    values.push_back(absl::StrFormat("%.0f%% (%.1f cycles per instruction)", s.share_pct(),
                                     s.cycles_per_instruction()));
    label = std::max(label, TextWidthBound(s.reason()) + kGap);
    value = std::max(value, TextWidthBound(values.back()) + kGap);
  }
  std::string svg = absl::StrFormat(
      "<svg class=\"stalls\" width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"warp "
      "stall reasons of %s\">\n",
      label + kBar + value, kRow * n + 8, HtmlEscape(ShortKernelName(k.name())));
  for (int i = 0; i < n; ++i) {
    const v1::WarpStall& s = k.stalls(i);
    const double y = 4 + kRow * i, width = kBar * std::clamp(s.share_pct(), 0.0, 100.0) / 100;
    absl::StrAppend(
        &svg, absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%s</text>"
                              "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.1f\" height=\"12\" "
                              "fill=\"#4c78a8\"><title>%s</title></rect><text x=\"%.1f\" "
                              "y=\"%.0f\">%s</text>\n",
                              label - kGap, y + 11, HtmlEscape(s.reason()), label, y, width,
                              HtmlEscape(s.reason()), label + width + kGap, y + 11, values[i]));
  }
  return svg + "</svg>\n";
}

// Log-log: flop per byte against flop/s, the DRAM roof up to the ridge, the FP32 roof after
// it, and the kernel's point.
std::string Roofline(const v1::KernelProfile& k) {
  const v1::RooflinePoint& r = k.roofline();
  if (r.arithmetic_intensity() <= 0 || r.flops_per_second() <= 0 || r.ridge_point() <= 0) {
    return "";
  }
  constexpr double kW = 420, kH = 240, kPad = 40;
  const double x_lo =
      std::floor(std::log10(std::min(r.arithmetic_intensity(), r.ridge_point()))) - 1;
  const double x_hi =
      std::ceil(std::log10(std::max(r.arithmetic_intensity(), r.ridge_point()))) + 1;
  const double y_hi = std::ceil(std::log10(r.peak_flops_per_second()));
  const double y_lo = std::floor(std::log10(
      std::min(r.flops_per_second(), r.peak_dram_bytes_per_second() * std::pow(10.0, x_lo))));
  auto x = [&](double v) {
    return kPad + (std::log10(v) - x_lo) / (x_hi - x_lo) * (kW - 2 * kPad);
  };
  auto y = [&](double v) {
    return kH - kPad - (std::log10(v) - y_lo) / (y_hi - y_lo) * (kH - 2 * kPad);
  };
  const double lo = std::pow(10.0, x_lo), hi = std::pow(10.0, x_hi);
  std::string svg = absl::StrFormat(
      "<svg class=\"roofline\" width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"roofline "
      "of %s\">\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
      "stroke=\"#bbb\"/>\n",
      kW, kH, HtmlEscape(ShortKernelName(k.name())), kPad, kPad, kW - 2 * kPad, kH - 2 * kPad);
  absl::StrAppend(
      &svg, absl::StrFormat("<polyline fill=\"none\" stroke=\"#333\" stroke-width=\"2\" "
                            "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
                            x(lo), y(r.peak_dram_bytes_per_second() * lo), x(r.ridge_point()),
                            y(r.peak_flops_per_second()), x(hi), y(r.peak_flops_per_second())));
  absl::StrAppend(
      &svg, absl::StrFormat(
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#e45756\"><title>%.3g flop/B, "
                "%.3g GFLOP/s</title></circle>\n",
                x(r.arithmetic_intensity()), y(r.flops_per_second()), r.arithmetic_intensity(),
                r.flops_per_second() / 1e9));
  absl::StrAppend(&svg,
                  absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\">flop per DRAM byte (10^%.0f to "
                                  "10^%.0f)</text><text x=\"4\" y=\"%.0f\">flop/s (10^%.0f to "
                                  "10^%.0f)</text>\n",
                                  kPad, kH - 12, x_lo, x_hi, kPad - 10, y_lo, y_hi));
  return svg + "</svg>\n";
}

}  // namespace

std::string ProfileHtml(const v1::WorkloadResult& result) {
  if (!result.has_profile()) return "";
  std::string out = absl::StrCat("<details class=\"profile\"><summary>profile of ",
                                 HtmlEscape(result.implementation()), "</summary>\n<pre>");
  for (const std::string& line : ProfileLines(result.profile())) {
    absl::StrAppend(&out, HtmlEscape(line), "\n");
  }
  absl::StrAppend(&out, "</pre>\n");
  for (const v1::KernelProfile& k : result.profile().kernels()) {
    absl::StrAppend(&out, StallBars(k), Roofline(k));
  }
  return out + "</details>\n";
}

}  // namespace kerneleval::client::report_internal
