// Pieces shared by the report formatters (report_table.cc, report_csv.cc, report_html.cc,
// response_format.cc). Not installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client::report_internal {

namespace v1 = ::kerneleval::v1;

struct WorkloadGroup {
  std::string name;
  std::vector<const v1::WorkloadResult*> results;  // Ranked by rank, then unranked.
};

// Workloads in the order the server reported them.
std::vector<WorkloadGroup> GroupByWorkload(const v1::BenchmarkReport& report);

// The value of `axis` for a result: its var axes first, then the definition's const axes;
// -1 when neither has it.
int64_t AxisValue(const v1::BenchmarkReport& report, const v1::WorkloadResult& result,
                  const std::string& axis);

// The var axis to plot against: the one with the most distinct values across results
// (batch_size on ties, as in the seed suites' primary sweep). Empty when no result has one.
std::string PlotAxis(const v1::BenchmarkReport& report);

// True when the results span more than one device, so tables need a device column.
bool MultiDevice(const v1::BenchmarkReport& report);

// "passed 3.9e-03", "incorrect 1.2e+00", "runtime_error", "skipped", "rejected", "unchecked".
std::string CorrectnessText(const v1::WorkloadResult& result);
// 100 x the preferred figure's ratio; negative when there is none.
double SolPercent(const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures);
// "vs #1" as "1.00x", "-" when unranked.
std::string VsBestText(double vs_best);
std::string RankText(uint32_t rank);
// "4.81 TB/s" style.
std::string FormatBandwidth(double bytes_per_second);
// "%.6g".
std::string Number(double value);
// How a result was measured: its own measured_as ("cupti, cold"), or, from servers that do
// not set it, its timer and the report's protocol.
std::string MeasuredAsText(const v1::BenchmarkReport& report, const v1::WorkloadResult& result);
// "read 101.5 MB (declared 101.4), write 29.9 MB (declared 50.7), 4.43 TB/s", or the
// reason the counters could not be read; empty when DRAM bytes were not asked for.
std::string DramText(const v1::DramTraffic& dram);
// "kernels (medians): AddKernel 2.02 us, gap 0.83 us, RowKernel 1.21 us" for a call of
// several kernels (names without template arguments or parameters); empty for one kernel
// or none (events).
// `text` safe inside HTML elements and attribute values.
std::string HtmlEscape(const std::string& text);
// A kernel's function without its return type, template arguments or parameters.
std::string ShortKernelName(const std::string& full);
std::string KernelsText(const google::protobuf::RepeatedPtrField<v1::KernelTiming>& kernels);
// "SM 1980 MHz (1965-1980), memory 3201 MHz, 52 C, 420 W" over the samples; "-" without.
std::string ClockSummaryText(const v1::ClockSummary& clocks);
// "2.514 s for 4 workloads (0.001 s after the first), 3 prepared ahead": how long the device
// waited for the host's inputs and references; "-" from servers that do not report it.
std::string HostWaitText(const v1::Environment& env);
// What the cold protocol reads between timed calls on `device`: "reads 64.0 MiB (twice the
// 32.0 MiB last-level cache) before each timed call, outside the timed window; one read took
// 3.10 ms"; empty where the device does not say.
std::string ColdFlushText(const v1::Device& device);

}  // namespace kerneleval::client::report_internal
