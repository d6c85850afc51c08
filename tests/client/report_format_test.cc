// Report formatting of a hand-built report: every format shows every workload and
// implementation, and the machine formats parse back.
#include "client/report_format.h"

#include <algorithm>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/csv_cell.h"

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

v1::BenchmarkReport MakeReport() {
  v1::BenchmarkReport report;
  report.set_suite("fused_add_rmsnorm_h2048");
  v1::SuiteDefinition* def = report.mutable_definition();
  def->set_name("fused_add_rmsnorm_h2048");
  def->set_dtype(v1::DTYPE_BF16);
  def->set_mode(v1::MODE_OUTPUT);
  v1::Axis* batch = def->add_axes();
  batch->set_name("batch_size");
  v1::Axis* hidden = def->add_axes();
  hidden->set_name("hidden_size");
  hidden->set_is_const(true);
  hidden->set_value(2048);
  report.mutable_protocol()->set_cache(v1::CACHE_MODE_COLD);
  report.mutable_protocol()->set_cuda_graph(true);
  report.mutable_protocol()->set_graph_calls(20);
  report.mutable_protocol()->set_repetitions(50);

  const char* impls[] = {"fused", "unfused"};
  const int64_t batches[] = {1, 79, 16254};
  for (int64_t b : batches) {
    for (int i = 0; i < 2; ++i) {
      v1::WorkloadResult* r = report.add_results();
      r->set_workload("batch_size=" + std::to_string(b));
      (*r->mutable_axes())["batch_size"] = b;
      r->set_implementation(impls[i]);
      r->set_device("cuda:0");
      r->set_status(v1::RESULT_STATUS_PASSED);
      r->set_timer(v1::TIMER_CUPTI);
      const double median = 4e-6 * (1 + b / 100.0) * (i + 1);
      r->mutable_latency()->set_samples(50);
      r->mutable_latency()->set_median_seconds(median);
      r->mutable_latency()->set_mean_seconds(median * 1.01);
      r->mutable_latency()->set_min_seconds(median * 0.98);
      r->mutable_latency()->set_p99_seconds(median * 1.1);
      r->set_bytes_moved(static_cast<uint64_t>(3 * b * 2048 * 2 + 2048 * 2));
      r->set_bytes_per_second(r->bytes_moved() / median);
      v1::SolFigure* datasheet = r->add_sol();
      datasheet->set_source(v1::PEAK_SOURCE_DATASHEET);
      datasheet->set_peak_bytes_per_second(4.8e12);
      datasheet->set_sol_ratio(0.5);
      v1::SolFigure* attrs = r->add_sol();
      attrs->set_source(v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
      attrs->set_peak_bytes_per_second(4.814e12);
      attrs->set_sol_ratio(0.68 / (i + 1));
      r->mutable_correctness()->set_checked(true);
      r->mutable_correctness()->set_passed(true);
      r->mutable_correctness()->set_max_abs_error(3.9e-3);
      r->set_rank(i + 1);
      r->set_vs_best(i + 1.0);
    }
  }
  for (int i = 0; i < 2; ++i) {
    v1::ImplementationSummary* s = report.add_summaries();
    s->set_implementation(impls[i]);
    s->set_device("cuda:0");
    s->set_rank(i + 1);
    s->set_mean_latency_seconds(5e-6 * (i + 1));
    s->set_geomean_sol_ratio(0.6 / (i + 1));
    s->set_vs_best(i + 1.0);
    s->set_passed(3);
  }
  v1::Environment* env = report.add_environments();
  env->mutable_device()->set_name("cuda:0");
  env->mutable_device()->set_model("NVIDIA H200");
  env->mutable_device()->set_uuid("GPU-1234");
  env->set_driver_version("580.65");
  env->set_cuda_runtime_version("13.0");
  env->set_clocks_available(true);
  env->mutable_clocks_before()->set_sm_mhz(1980);
  env->mutable_clocks_after()->set_sm_mhz(1980);
  env->set_server_version("0.1.0");
  env->set_git_revision("abc123");
  env->set_timestamp("2026-01-01T00:00:00Z");
  env->set_cupti_status("CUPTI activity API");
  for (double wait : {2.5, 0.0, 0.014}) env->add_host_wait_seconds(wait);
  env->set_workloads_prepared_ahead(2);
  report.set_wall_seconds(12.5);
  report.set_complete(true);
  return report;
}

TEST(ReportTable, ShowsEveryWorkloadImplementationAndEnvironment) {
  const std::string table = FormatReportTable(MakeReport());
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
  v1::BenchmarkReport report = MakeReport();
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
  v1::BenchmarkReport report = MakeReport();
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
  v1::BenchmarkReport report = MakeReport();
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

// A profile as the server sends it: figures derived, advice given.
void AddProfile(v1::WorkloadResult* r) {
  v1::ProfileReport* p = r->mutable_profile();
  p->set_available(true);
  p->set_source("CUPTI range profiler on GH100: a range per kernel, 14 replays of one call");
  v1::KernelProfile* k = p->add_kernels();
  k->set_name("void kerneleval::AddRmsNorm<__nv_bfloat16, 8>(Params)");
  for (std::uint32_t g : {132u, 1u, 1u}) k->mutable_launch()->add_grid(g);
  for (std::uint32_t b : {256u, 1u, 1u}) k->mutable_launch()->add_block(b);
  k->mutable_launch()->set_registers_per_thread(40);
  k->set_duration_seconds(2.5e-6);
  k->mutable_throughput()->set_dram_pct(83);
  k->mutable_throughput()->set_memory_pct(83);
  k->mutable_throughput()->set_sm_pct(21);
  k->mutable_memory()->set_dram_read_bytes(8.4e6);
  k->mutable_memory()->set_load_sectors_per_request(16);
  k->mutable_occupancy()->set_theoretical_pct(100);
  k->mutable_occupancy()->set_achieved_pct(71);
  k->mutable_occupancy()->add_limited_by("warps");
  v1::WarpStall* s = k->add_stalls();
  s->set_reason("long_scoreboard");
  s->set_share_pct(64);
  s->set_cycles_per_instruction(9.5);
  v1::RooflinePoint* roof = k->mutable_roofline();
  roof->set_flops(1.2e7);
  roof->set_dram_bytes(1.26e7);
  roof->set_arithmetic_intensity(0.95);
  roof->set_flops_per_second(4.8e12);
  roof->set_peak_flops_per_second(6.7e13);
  roof->set_peak_dram_bytes_per_second(3.35e12);
  roof->set_ridge_point(20);
  roof->set_attainable_flops_per_second(3.2e12);
  roof->set_bound("memory");
  v1::ProfileAdvice* a = k->add_advice();
  a->set_rule("at_memory_roof");
  a->set_text("DRAM at 83% of its peak");
  a->set_figure("throughput.dram_pct");
  a->set_value(83);
  v1::SourceLines* lines = k->mutable_source_lines();
  lines->set_available(true);
  lines->set_samples(1000);
  lines->set_calls(20);
  v1::SourceLine* line = lines->add_lines();
  line->set_file("submission.cu");
  line->set_line(14);
  line->set_samples(380);
  line->set_share_pct(38);
  v1::LineReason* reason = line->add_reasons();
  reason->set_reason("long_scoreboard");
  reason->set_samples(300);
}

TEST(ReportTable, PrintsAProfileUnderItsResult) {
  v1::BenchmarkReport report = MakeReport();
  AddProfile(report.mutable_results(0));
  report.mutable_results(1)->mutable_profile()->set_unavailable_reason(
      "counters unavailable on this machine: no permission");
  const std::string table = FormatReportTable(report);
  for (const char* needle :
       {"profile 0 kerneleval::AddRmsNorm: grid 132x1x1, block 256x1x1, 40 registers",
        "throughput: SM 21%, memory 83% (DRAM 83%", "16.0 sectors per load request",
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
  v1::BenchmarkReport report = MakeReport();
  AddProfile(report.mutable_results(0));
  const std::string html = FormatReportHtml(report);
  EXPECT_NE(html.find("<details class=\"profile\">"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"stalls\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"roofline\""), std::string::npos);
  EXPECT_NE(html.find("profile 0 kerneleval::AddRmsNorm: grid 132x1x1"), std::string::npos);
  EXPECT_EQ(html.find("<__nv_bfloat16"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
}

TEST(ReportCsv, HasHeaderAndOneRowPerWorkloadAndImplementation) {
  const std::string csv = FormatReportCsv(MakeReport());
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
  v1::BenchmarkReport report = MakeReport();
  report.set_run_id("run-7");
  std::istringstream lines(FormatReportCsv(report));
  std::string line;
  std::getline(lines, line);  // the header
  size_t rows = 0;
  for (; std::getline(lines, line); ++rows) EXPECT_EQ(line.rfind("run-7,", 0), 0u) << line;
  EXPECT_EQ(rows, 6u);
}

TEST(ReportHtml, NamesItsRunOrSaysItWasNotStored) {
  v1::BenchmarkReport report = MakeReport();
  EXPECT_NE(FormatReportHtml(report).find("Not stored"), std::string::npos);
  report.set_run_id("run-<7>");
  const std::string html = FormatReportHtml(report);
  EXPECT_NE(html.find("Run run-&lt;7&gt;."), std::string::npos) << html.substr(0, 2000);
  EXPECT_EQ(html.find("Not stored"), std::string::npos);
}

TEST(ReportCsv, QuotesFieldsWithCommas) {
  v1::BenchmarkReport report = MakeReport();
  report.mutable_results(0)->set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
  report.mutable_results(0)->set_error("bad, \"very\" bad");
  const std::string csv = FormatReportCsv(report);
  EXPECT_NE(csv.find("\"bad, \"\"very\"\" bad\""), std::string::npos) << csv;
}

// OWASP CSV injection: a name a spreadsheet would run as a formula reads as text.
TEST(ReportCsv, CellsThatWouldRunAsFormulasBeginWithAQuote) {
  v1::BenchmarkReport report = MakeReport();
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
  const v1::BenchmarkReport report = MakeReport();
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
  v1::BenchmarkReport report = MakeReport();
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
  const std::string html = FormatReportHtml(MakeReport());
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
  v1::BenchmarkReport report = MakeReport();
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
  v1::BenchmarkReport report = MakeReport();
  report.mutable_results(0)->set_implementation("<b>&x");
  const std::string html = FormatReportHtml(report);
  EXPECT_EQ(html.find("<b>&x"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;x"), std::string::npos);
}

TEST(ReportTable, MarksIncorrectResultsAndUnranked) {
  v1::BenchmarkReport report = MakeReport();
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
  *suites.add_suites() = MakeReport().definition();
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
