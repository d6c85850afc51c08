// Report formatting of a hand-built report: every format shows every workload and
// implementation, and the machine formats parse back.
#include "client/report_format.h"

#include <algorithm>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/csv_cell.h"
#include "tests/client/report_samples.h"

namespace kerneleval::client {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++count;
  }
  return count;
}

// Fields of one CSV line (RFC 4180: commas inside double quotes do not separate).
size_t CsvFields(const std::string& line) {
  size_t fields = 1;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++fields;
  }
  return fields;
}

TEST(ReportTable, ShowsEveryWorkloadImplementationAndEnvironment) {
  const std::string table = FormatReportTable(SampleReport());
  for (const char* needle :
       {"batch_size=1 ", "batch_size=79", "batch_size=16254", "fused", "unfused", "NVIDIA H200",
        "GPU-1234", "580.65", "abc123", "cupti", "cold, graph x20", "passed 3.9e-03", "1.00x",
        "2.00x", "2.514 s for 3 workloads (0.014 s after the first), 2 prepared ahead"}) {
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  }
  // SOL % uses the device-attribute figure (68.0), not the first one (50.0).
  EXPECT_NE(table.find("68.0"), std::string::npos) << table;
  EXPECT_EQ(table.find("50.0 "), std::string::npos) << table;
  EXPECT_NE(table.find("4.04 us"), std::string::npos) << "batch 1 median in microseconds";
}

// A cold report says what the protocol read between calls on each device, and how long one
// read took; a hot one does not.
TEST(ReportTable, SaysWhatTheColdProtocolReadsBetweenCalls) {
  v1::BenchmarkReport report = SampleReport();
  v1::Device* cpu = report.add_environments()->mutable_device();
  cpu->set_name("cpu");
  cpu->set_kind("cpu");
  cpu->set_l2_cache_bytes(32ull << 20);
  cpu->set_cold_flush_bytes(64ull << 20);
  cpu->set_cold_flush_seconds(0.0031);
  const std::string cold = FormatReportTable(report);
  EXPECT_NE(cold.find("Cold on cpu: reads 64.0 MiB (twice the 32.0 MiB last-level cache) "
                      "before each timed call, outside the timed window; one read took 3.10 ms"),
            std::string::npos)
      << cold;
  report.mutable_protocol()->set_cache(v1::CACHE_MODE_HOT);
  EXPECT_EQ(FormatReportTable(report).find("Cold on cpu"), std::string::npos);
}

TEST(ReportTable, SaysHowManyCallsOfASubmissionWereChecked) {
  v1::BenchmarkReport report = SampleReport();
  report.mutable_results(0)->set_calls_checked(60);  // fused at batch 1
  const std::string table = FormatReportTable(report);
  const std::string note = "60 calls checked on the device (output, inputs, guards)";
  const size_t at = table.find(note);
  ASSERT_NE(at, std::string::npos) << table;
  EXPECT_EQ(table.find("calls checked", at + note.size()), std::string::npos)
      << "one result, one note\n"
      << table;
  const size_t line = table.rfind('\n', at) + 1;
  EXPECT_EQ(table.substr(line, 9), "  fused (") << table;
}

TEST(ReportTable, SplitsACallOfSeveralKernelsIntoKernelsAndGaps) {
  v1::BenchmarkReport report = SampleReport();
  v1::WorkloadResult* unfused = report.mutable_results(1);
  v1::KernelTiming* add = unfused->add_kernels();
  add->set_name(
      "void kerneleval::(anonymous namespace)::AddKernel<__nv_bfloat16, 8>(const void*, long)");
  add->mutable_duration()->set_median_seconds(2.02e-6);
  v1::KernelTiming* norm = unfused->add_kernels();
  norm->set_index(1);
  norm->set_name("void kerneleval::cuda_detail::RowKernel<float, 4>(RowParams)");
  norm->mutable_duration()->set_median_seconds(1.21e-6);
  norm->mutable_gap_before()->set_median_seconds(0.83e-6);
  // One kernel says nothing the row does not: no note.
  v1::KernelTiming* only = report.mutable_results(0)->add_kernels();
  only->set_name("fused_rows");
  only->mutable_duration()->set_median_seconds(1e-6);
  const std::string table = FormatReportTable(report);
  const std::string note =
      "kernels (medians): kerneleval::AddKernel 2.02 us, gap 0.83 us, "
      "kerneleval::cuda_detail::RowKernel 1.21 us";
  const size_t at = table.find(note);
  ASSERT_NE(at, std::string::npos) << table;
  EXPECT_EQ(table.find("kernels (medians)", at + note.size()), std::string::npos) << table;
  EXPECT_EQ(table.find("fused_rows"), std::string::npos) << table;
}

TEST(ReportTable, PrintsAProfileUnderItsResult) {
  v1::BenchmarkReport report = SampleReport();
  AddSampleProfile(report.mutable_results(0));
  report.mutable_results(1)->mutable_profile()->set_unavailable_reason(
      "counters unavailable on this machine: no permission");
  const std::string table = FormatReportTable(report);
  for (const char* needle :
       {"profile 0 kerneleval::AddRmsNorm: grid 132x1x1, block 256x1x1, 40 registers",
        "throughput: SM 21%, memory 83% (DRAM 83%", "16.0 sectors per load request",
        "the call read 1.00x the 8.40 MB the definition reads and moved 1.10x its 12.60 MB",
        "occupancy: 100% theoretical (0 blocks per SM, limited by warps), 71% achieved",
        "stalls: long_scoreboard 64% (9.5 cycles per instruction)", "memory-bound",
        "advice [at_memory_roof]: DRAM at 83% of its peak",
        "source lines (1000 warp samples over 20 calls):",
        "submission.cu:14 38% (long_scoreboard 30%)",
        "counters unavailable on this machine: no permission"}) {
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  }
}

TEST(ReportHtml, DrawsAProfilesStallsAndRoofline) {
  v1::BenchmarkReport report = SampleReport();
  AddSampleProfile(report.mutable_results(0));
  const std::string html = FormatReportHtml(report);
  EXPECT_NE(html.find("<details class=\"profile\">"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"stalls\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"roofline\""), std::string::npos);
  EXPECT_NE(html.find("profile 0 kerneleval::AddRmsNorm: grid 132x1x1"), std::string::npos);
  EXPECT_EQ(html.find("<__nv_bfloat16"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
}

TEST(ReportCsv, HasHeaderAndOneRowPerWorkloadAndImplementation) {
  const std::string csv = FormatReportCsv(SampleReport());
  std::istringstream lines(csv);
  std::string header;
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("run_id,suite,workload,batch_size,hidden_size,", 0), 0u) << header;
  EXPECT_NE(header.find("median_us"), std::string::npos);
  EXPECT_NE(header.find("sol_percent"), std::string::npos);
  const size_t columns = CsvFields(header);
  size_t rows = 0;
  for (std::string line; std::getline(lines, line);) {
    ++rows;
    EXPECT_EQ(CsvFields(line), columns) << line;
    EXPECT_NE(line.find(",2048,"), std::string::npos) << "const hidden_size filled in: " << line;
  }
  EXPECT_EQ(rows, 6u);
}

TEST(ReportCsv, EveryRowNamesItsRun) {
  v1::BenchmarkReport report = SampleReport();
  report.set_run_id("run-7");
  std::istringstream lines(FormatReportCsv(report));
  std::string line;
  std::getline(lines, line);  // the header
  size_t rows = 0;
  for (; std::getline(lines, line); ++rows) EXPECT_EQ(line.rfind("run-7,", 0), 0u) << line;
  EXPECT_EQ(rows, 6u);
}

TEST(ReportHtml, NamesItsRunOrSaysItWasNotStored) {
  v1::BenchmarkReport report = SampleReport();
  EXPECT_NE(FormatReportHtml(report).find("Not stored"), std::string::npos);
  report.set_run_id("run-<7>");
  const std::string html = FormatReportHtml(report);
  EXPECT_NE(html.find("Run run-&lt;7&gt;."), std::string::npos) << html.substr(0, 2000);
  EXPECT_EQ(html.find("Not stored"), std::string::npos);
}

TEST(ReportCsv, QuotesFieldsWithCommas) {
  v1::BenchmarkReport report = SampleReport();
  report.mutable_results(0)->set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
  report.mutable_results(0)->set_error("bad, \"very\" bad");
  const std::string csv = FormatReportCsv(report);
  EXPECT_NE(csv.find("\"bad, \"\"very\"\" bad\""), std::string::npos) << csv;
}

// OWASP CSV injection: a name a spreadsheet would run as a formula reads as text.
TEST(ReportCsv, CellsThatWouldRunAsFormulasBeginWithAQuote) {
  v1::BenchmarkReport report = SampleReport();
  report.mutable_results(0)->set_workload("=HYPERLINK(\"http://x.invalid\",\"open\")");
  report.mutable_results(1)->set_implementation("@SUM(A1)");
  report.mutable_results(0)->set_error("-2+3");
  const std::string csv = FormatReportCsv(report);
  EXPECT_NE(csv.find(",\"'=HYPERLINK(\"\"http://x.invalid\"\",\"\"open\"\")\","), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",'@SUM(A1),"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",'-2+3,"), std::string::npos) << csv;
  EXPECT_EQ(csv.find(",=HYPERLINK"), std::string::npos) << csv;
}

TEST(CsvCell, NeutralisesFormulasAndLeavesNumbers) {
  EXPECT_EQ(CsvCell("=1+2"), "'=1+2");
  EXPECT_EQ(CsvCell("+1+2"), "'+1+2");
  EXPECT_EQ(CsvCell("-1+2"), "'-1+2");
  EXPECT_EQ(CsvCell("@cmd"), "'@cmd");
  EXPECT_EQ(CsvCell("\t=cmd"), "'\t=cmd");
  EXPECT_EQ(CsvCell("\r=cmd"), "\"'\r=cmd\"");
  EXPECT_EQ(CsvCell("=a,b"), "\"'=a,b\"");
  EXPECT_EQ(CsvCell("-inf"), "'-inf");
  for (const char* number : {"-1", "-1.5", "+2", "-1.5e-3", "-.5", "3E+8", "0"}) {
    EXPECT_EQ(CsvCell(number), number);
  }
  EXPECT_EQ(CsvCell("plain"), "plain");
  EXPECT_EQ(CsvCell("a=b"), "a=b");
  EXPECT_EQ(CsvCell(""), "");
}

// Not protobuf's mapping any more (tests/client/json_output_test.cc checks every field's
// type): the values are still all there, under the proto's field names.
TEST(ReportJson, KeepsFieldNamesAndValuesWithNumbersAsNumbers) {
  const v1::BenchmarkReport report = SampleReport();
  absl::StatusOr<std::string> json = FormatReport(report, ReportFormat::kJson);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("\"max_rel_error\""), std::string::npos) << "zero primitives printed";
  const nlohmann::json doc = nlohmann::json::parse(*json);
  ASSERT_EQ(doc["results"].size(), static_cast<std::size_t>(report.results_size()));
  for (int i = 0; i < report.results_size(); ++i) {
    const v1::WorkloadResult& r = report.results(i);
    EXPECT_EQ(doc["results"][i]["bytes_moved"].get<std::uint64_t>(), r.bytes_moved());
    EXPECT_EQ(doc["results"][i]["implementation"], r.implementation());
    EXPECT_DOUBLE_EQ(doc["results"][i]["latency"]["median_seconds"].get<double>(),
                     r.latency().median_seconds());
    for (const auto& [axis, value] : r.axes()) {
      EXPECT_EQ(doc["results"][i]["axes"][axis].get<std::int64_t>(), value);
    }
  }
}

TEST(ReportJsonl, OneLinePerResultWithTheRunAndSuite) {
  v1::BenchmarkReport report = SampleReport();
  report.set_run_id("run-7");
  absl::StatusOr<std::string> text = FormatReport(report, ReportFormat::kJsonl);
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(Count(*text, "\n"), static_cast<std::size_t>(report.results_size()));
  std::istringstream lines(*text);
  std::string line;
  for (int i = 0; std::getline(lines, line); ++i) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["run_id"], "run-7");
    EXPECT_EQ(j["suite"], report.suite());
    EXPECT_EQ(j["implementation"], report.results(i).implementation());
  }
  report.clear_results();
  EXPECT_EQ(*FormatReport(report, ReportFormat::kJsonl), "");
}

TEST(ReportHtml, IsSelfContainedWithOnePolylinePerImplementation) {
  const std::string html = FormatReportHtml(SampleReport());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(html, "<svg"), 1u);
  EXPECT_EQ(Count(html, "<polyline"), 2u);
  EXPECT_NE(html.find("Scaling by batch_size"), std::string::npos);
  EXPECT_NE(html.find(">16254<"), std::string::npos) << "x ticks label the workloads";
  EXPECT_EQ(html.find("http://", html.find("</svg>")), std::string::npos) << "no external assets";
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  for (const char* needle : {"batch_size=79", "fused", "unfused", "NVIDIA H200"}) {
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
  }
}

TEST(ReportHtml, PlotsAgainstHiddenWhenHiddenIsTheVarAxis) {
  v1::BenchmarkReport report = SampleReport();
  int64_t hidden = 1024;
  for (v1::WorkloadResult& r : *report.mutable_results()) {
    r.mutable_axes()->clear();
    (*r.mutable_axes())["hidden_size"] = hidden;
    hidden *= 2;
  }
  const std::string html = FormatReportHtml(report);
  EXPECT_NE(html.find("Scaling by hidden_size"), std::string::npos);
}

TEST(ReportHtml, EscapesNames) {
  v1::BenchmarkReport report = SampleReport();
  report.mutable_results(0)->set_implementation("<b>&x");
  const std::string html = FormatReportHtml(report);
  EXPECT_EQ(html.find("<b>&x"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;x"), std::string::npos);
}

TEST(ReportTable, MarksIncorrectResultsAndUnranked) {
  v1::BenchmarkReport report = SampleReport();
  v1::WorkloadResult* r = report.mutable_results(1);
  r->set_status(v1::RESULT_STATUS_INCORRECT);
  r->mutable_correctness()->set_passed(false);
  r->mutable_correctness()->set_max_abs_error(1.5);
  r->mutable_correctness()->set_detail("output[3]: got 1, expected 2.5");
  r->set_rank(0);
  r->set_vs_best(0);
  const std::string table = FormatReportTable(report);
  EXPECT_NE(table.find("incorrect 1.5e+00"), std::string::npos) << table;
  EXPECT_NE(table.find("output[3]: got 1, expected 2.5"), std::string::npos) << table;
}

TEST(RunFormat, ShowsLatencySolAndCorrectness) {
  v1::RunResponse response;
  response.set_device("cpu");
  response.set_implementation("cpu_fused");
  response.set_timer(v1::TIMER_HOST_CLOCK);
  response.mutable_latency()->set_median_seconds(2.5e-3);
  response.set_bytes_moved(1 << 20);
  response.set_bytes_per_second(4.2e11);
  v1::SolFigure* sol = response.add_sol();
  sol->set_source(v1::PEAK_SOURCE_MEASURED_COPY);
  sol->set_peak_bytes_per_second(1e11);
  sol->set_sol_ratio(0.25);
  response.mutable_correctness()->set_checked(true);
  response.mutable_correctness()->set_passed(true);
  const std::string text = FormatRunResponse(response);
  for (const char* needle : {"cpu_fused", "host", "2.50 ms", "420.0 GB/s", "25.0 %",
                             "measured_copy", "passed max abs"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  }
}

TEST(ListFormats, ShowEveryEntry) {
  v1::ListDevicesResponse devices;
  devices.add_devices()->set_name("cuda:0");
  devices.add_devices()->set_name("cpu");
  const std::string d = FormatDevices(devices);
  EXPECT_NE(d.find("cuda:0"), std::string::npos);
  EXPECT_NE(d.find("cpu"), std::string::npos);

  v1::ListSuitesResponse suites;
  *suites.add_suites() = SampleReport().definition();
  EXPECT_NE(FormatSuites(suites).find("hidden_size=2048"), std::string::npos);

  v1::ListImplementationsResponse impls;
  impls.add_implementations()->set_name("fused");
  EXPECT_NE(FormatImplementations(impls).find("fused"), std::string::npos);
}

TEST(ReportFormat, ParsesNames) {
  EXPECT_EQ(ParseReportFormat("csv"), ReportFormat::kCsv);
  EXPECT_EQ(ParseReportFormat("html"), ReportFormat::kHtml);
  EXPECT_FALSE(ParseReportFormat("xml").has_value());
}

}  // namespace
}  // namespace kerneleval::client
