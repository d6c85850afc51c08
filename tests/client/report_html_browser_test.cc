// The HTML report's profile drawings as a real browser lays them out (headless Chromium,
// KERNELEVAL_BROWSER): a script added to the page measures every drawn element after layout,
// and the test checks the geometry against the profile's numbers read through the chart's own
// axis labels: the roofline's point and roof where a reader of the labels would place those
// numbers, the point under its roof, stall bars as long as their shares, and no label clipped
// by its drawing or drawn over a bar.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/report_format.h"
#include "tests/client/report_samples.h"

namespace kerneleval::client {
namespace {

using nlohmann::json;

// Runs after layout: opens every <details> (a closed one lays nothing out), then writes what
// it measured into <pre id="browser-check"> for --dump-dom to print.
constexpr char kMeasure[] = R"js(<script>
(() => {
  for (const d of document.querySelectorAll('details')) d.open = true;
  const box = e => { const b = e.getBoundingClientRect();
                     return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
  const onScreen = (svg, x, y) => {
    const p = svg.createSVGPoint(); p.x = x; p.y = y;
    const q = p.matrixTransform(svg.getScreenCTM()); return [q.x, q.y]; };
  const texts = svg => Array.from(svg.querySelectorAll('text'),
                                  t => ({text: t.textContent, box: box(t)}));
  const out = {rooflines: [], stalls: []};
  for (const svg of document.querySelectorAll('svg.roofline')) {
    const poly = svg.querySelector('polyline'), circle = svg.querySelector('circle');
    out.rooflines.push({
      svg: box(svg), frame: box(svg.querySelector('rect')),
      drawn_as_svg: poly instanceof SVGPolylineElement && circle instanceof SVGCircleElement,
      roof: Array.from(poly.points, p => onScreen(svg, p.x, p.y)),
      point: onScreen(svg, circle.cx.baseVal.value, circle.cy.baseVal.value),
      labels: texts(svg)});
  }
  for (const svg of document.querySelectorAll('svg.stalls')) {
    out.stalls.push({svg: box(svg), labels: texts(svg),
                     bars: Array.from(svg.querySelectorAll('rect'),
                                      r => ({reason: r.textContent, box: box(r)}))});
  }
  const pre = document.createElement('pre');
  pre.id = 'browser-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
)js";

std::string Unescape(std::string text) {
  const std::pair<const char*, const char*> entities[] = {
      {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&#39;", "'"}, {"&amp;", "&"}};
  for (const auto& [entity, plain] : entities) {
    for (size_t at = text.find(entity); at != std::string::npos; at = text.find(entity, at + 1)) {
      text.replace(at, std::strlen(entity), plain);
    }
  }
  return text;
}

// The page laid out by the browser, measured by kMeasure.
json Measure(const std::string& html) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kerneleval-browser-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string page = html;
  const size_t body_end = page.rfind("</body>");
  page.insert(body_end == std::string::npos ? page.size() : body_end, kMeasure);
  std::ofstream(dir / "report.html") << page;
  const std::string command = std::string("timeout 120 '") + KERNELEVAL_BROWSER +
                              "' --headless --no-sandbox --disable-gpu --no-first-run "
                              "--user-data-dir='" +
                              (dir / "user-data").string() + "' --dump-dom 'file://" +
                              (dir / "report.html").string() + "' 2>'" +
                              (dir / "browser.log").string() + "'";
  std::string dom;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) dom.append(buffer, n);
    const int status = ::pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
  }
  std::filesystem::remove_all(dir);
  const std::string open = "<pre id=\"browser-check\">";
  const size_t from = dom.find(open);
  const size_t to = dom.find("</pre>", from);
  if (from == std::string::npos || to == std::string::npos) {
    ADD_FAILURE() << "the browser printed no measurements:\n" << dom.substr(0, 2000);
    return json::object();
  }
  return json::parse(Unescape(dom.substr(from + open.size(), to - from - open.size())));
}

struct Box {
  double left, top, right, bottom;
  explicit Box(const json& j)
      : left(j["left"]), top(j["top"]), right(j["right"]), bottom(j["bottom"]) {}
  bool Contains(const Box& inner, double slack = 0.5) const {
    return inner.left >= left - slack && inner.right <= right + slack && inner.top >= top - slack &&
           inner.bottom <= bottom + slack;
  }
  bool Overlaps(const Box& other) const {
    return left < other.right && other.left < right && top < other.bottom && other.top < bottom;
  }
};

// "... (10^-2 to 10^2)": the decades an axis spans, as its label states them.
std::pair<double, double> Decades(const std::string& label) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(label, m, std::regex(R"(\(10\^(-?\d+) to 10\^(-?\d+)\))")))
      << label;
  if (m.size() < 3) return {0, 1};
  return {std::stod(m[1]), std::stod(m[2])};
}

// The second kernel is the first's opposite: compute-bound, far below its roof, one stall
// reason holding every stalled cycle (the longest bar with the longest value text).
v1::BenchmarkReport ReportWithTwoProfiles() {
  v1::BenchmarkReport report = SampleReport();
  AddSampleProfile(report.mutable_results(0));
  v1::KernelProfile* k = report.mutable_results(0)->mutable_profile()->add_kernels();
  k->set_name("void fused_rows<__nv_bfloat16>(const __nv_bfloat16*, float)");
  v1::WarpStall* s = k->add_stalls();
  s->set_reason("math_pipe_throttle");
  s->set_share_pct(100);
  s->set_cycles_per_instruction(123.4);
  v1::RooflinePoint* roof = k->mutable_roofline();
  roof->set_arithmetic_intensity(40);
  roof->set_flops_per_second(1e9);
  roof->set_peak_flops_per_second(6.7e13);
  roof->set_peak_dram_bytes_per_second(3.35e12);
  roof->set_ridge_point(20);
  return report;
}

class ReportHtmlInBrowser : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    report_ = new v1::BenchmarkReport(ReportWithTwoProfiles());
    measured_ = new json(Measure(FormatReportHtml(*report_)));
  }
  static void TearDownTestSuite() {
    delete report_;
    delete measured_;
  }
  static const v1::KernelProfile& Kernel(int i) { return report_->results(0).profile().kernels(i); }
  static v1::BenchmarkReport* report_;
  static json* measured_;
};
v1::BenchmarkReport* ReportHtmlInBrowser::report_ = nullptr;
json* ReportHtmlInBrowser::measured_ = nullptr;

TEST_F(ReportHtmlInBrowser, PlacesEachRooflineWhereItsAxisLabelsSay) {
  ASSERT_EQ((*measured_)["rooflines"].size(), 2u) << measured_->dump();
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("kernel " + std::to_string(i));
    const json& drawn = (*measured_)["rooflines"][i];
    const v1::RooflinePoint& r = Kernel(i).roofline();
    EXPECT_TRUE(drawn["drawn_as_svg"].get<bool>());
    ASSERT_EQ(drawn["labels"].size(), 2u);
    const auto [x_lo, x_hi] = Decades(drawn["labels"][0]["text"]);
    const auto [y_lo, y_hi] = Decades(drawn["labels"][1]["text"]);
    const Box frame(drawn["frame"]);
    auto x = [&](double v) {
      return frame.left + (std::log10(v) - x_lo) / (x_hi - x_lo) * (frame.right - frame.left);
    };
    auto y = [&](double v) {
      return frame.bottom - (std::log10(v) - y_lo) / (y_hi - y_lo) * (frame.bottom - frame.top);
    };
    constexpr double kPx = 1.0;
    const json& point = drawn["point"];
    EXPECT_NEAR(point[0].get<double>(), x(r.arithmetic_intensity()), kPx);
    EXPECT_NEAR(point[1].get<double>(), y(r.flops_per_second()), kPx);
    const json& roof = drawn["roof"];
    ASSERT_EQ(roof.size(), 3u);
    const double lo = std::pow(10.0, x_lo);
    EXPECT_NEAR(roof[0][0].get<double>(), frame.left, kPx) << "the roof starts at the frame";
    EXPECT_NEAR(roof[0][1].get<double>(), y(r.peak_dram_bytes_per_second() * lo), kPx);
    EXPECT_NEAR(roof[1][0].get<double>(), x(r.ridge_point()), kPx);
    EXPECT_NEAR(roof[1][1].get<double>(), y(r.peak_flops_per_second()), kPx);
    EXPECT_NEAR(roof[2][0].get<double>(), frame.right, kPx) << "and ends at it";
    EXPECT_NEAR(roof[2][1].get<double>(), y(r.peak_flops_per_second()), kPx);
    // Under the roof: at the point's x, the roof is higher on screen (a smaller y).
    const double px = point[0], py = point[1];
    const json& a = px < roof[1][0].get<double>() ? roof[0] : roof[1];
    const json& b = px < roof[1][0].get<double>() ? roof[1] : roof[2];
    const double roof_y = a[1].get<double>() + (b[1].get<double>() - a[1].get<double>()) *
                                                   (px - a[0].get<double>()) /
                                                   (b[0].get<double>() - a[0].get<double>());
    EXPECT_GE(py, roof_y - kPx);
    EXPECT_TRUE(
        frame.Contains(Box(json{{"left", px}, {"right", px}, {"top", py}, {"bottom", py}})));
    const Box svg(drawn["svg"]);
    for (const json& label : drawn["labels"]) {
      EXPECT_TRUE(svg.Contains(Box(label["box"]))) << "clipped: " << label.dump();
    }
    EXPECT_FALSE(Box(drawn["labels"][0]["box"]).Overlaps(Box(drawn["labels"][1]["box"])));
  }
}

TEST_F(ReportHtmlInBrowser, DrawsStallBarsAsLongAsTheirSharesWithNothingClipped) {
  ASSERT_EQ((*measured_)["stalls"].size(), 2u) << measured_->dump();
  // One scale for every chart: the 100% bar of the second kernel sets it.
  const Box full((*measured_)["stalls"][1]["bars"][0]["box"]);
  const double px_per_pct = (full.right - full.left) / 100;
  ASSERT_GT(px_per_pct, 1.0);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("kernel " + std::to_string(i));
    const json& drawn = (*measured_)["stalls"][i];
    const v1::KernelProfile& k = Kernel(i);
    ASSERT_EQ(drawn["bars"].size(), static_cast<size_t>(k.stalls_size()));
    ASSERT_EQ(drawn["labels"].size(), 2u * k.stalls_size());
    const Box svg(drawn["svg"]);
    for (int s = 0; s < k.stalls_size(); ++s) {
      const json& bar = drawn["bars"][s];
      EXPECT_EQ(bar["reason"], k.stalls(s).reason());
      const Box box(bar["box"]);
      EXPECT_NEAR(box.right - box.left, px_per_pct * k.stalls(s).share_pct(), 0.5);
      const Box name(drawn["labels"][2 * s]["box"]);
      const Box value(drawn["labels"][2 * s + 1]["box"]);
      EXPECT_EQ(drawn["labels"][2 * s]["text"], k.stalls(s).reason());
      EXPECT_LE(name.right, box.left + 0.5) << "the reason ends before its bar";
      EXPECT_GE(value.left, box.right - 0.5) << "the value starts after its bar";
      for (const Box& text : {name, value}) EXPECT_TRUE(svg.Contains(text)) << "clipped";
      if (s > 0) {
        EXPECT_FALSE(Box(drawn["labels"][2 * s - 2]["box"]).Overlaps(name)) << "rows overlap";
      }
    }
  }
}

}  // namespace
}  // namespace kerneleval::client
