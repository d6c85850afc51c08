#include "server/figures/sol.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace kerneleval::server {
namespace {

std::string Format(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// "12 MiB", "1.5 MiB", "96 KiB": sizes as cache sizes are spoken of.
std::string Bytes(double bytes) {
  if (bytes >= 1 << 20) return Format("%.3g MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return Format("%.3g KiB", bytes / (1 << 10));
  return Format("%.0f B", bytes);
}

std::string Rate(double bytes_per_second) {
  if (bytes_per_second >= 1e12) return Format("%.2f TB/s", bytes_per_second / 1e12);
  return Format("%.2f GB/s", bytes_per_second / 1e9);
}

}  // namespace

double AttributePeakBytesPerSecond(std::int64_t memory_clock_khz, int bus_width_bits) {
  if (memory_clock_khz <= 0 || bus_width_bits <= 0) return 0;
  // HBM and GDDR report the real clock; the factor 2 is the double data rate.
  return static_cast<double>(memory_clock_khz) * 1e3 * 2.0 * static_cast<double>(bus_width_bits) /
         8.0;
}

std::optional<double> DatasheetPeakBytesPerSecond(std::string_view model) {
  const std::string upper = absl::AsciiStrToUpper(absl::string_view(model.data(), model.size()));
  bool h100 = false, h200 = false, b100 = false, b200 = false;
  bool sxm = false, hbm3 = false, pcie = false, nvl = false;
  for (absl::string_view word : absl::StrSplit(upper, absl::ByAnyChar(" -_/"), absl::SkipEmpty())) {
    h100 |= word == "H100";
    h200 |= word == "H200";
    b100 |= word == "B100";
    b200 |= word == "B200";
    sxm |= word == "SXM" || word == "SXM5";
    hbm3 |= word == "HBM3";
    pcie |= word == "PCIE";
    nvl |= word == "NVL";
  }
  // NVIDIA H200 Tensor Core GPU datasheet: 4.8 TB/s for both H200 SXM and H200 NVL.
  if (h200) return 4.8e12;
  if (h100) {
    // NVIDIA H100 Tensor Core GPU datasheet: H100 SXM 3.35 TB/s, H100 NVL 3.9 TB/s; H100 PCIe
    // 2.0 TB/s (product brief PB-11133-001 states ">2,000 GB/s"). The SXM5 board reports
    // itself as "NVIDIA H100 80GB HBM3"; the PCIe card's memory is HBM2e.
    if (pcie) return 2.0e12;
    if (nvl) return 3.9e12;
    if (sxm || hbm3) return 3.35e12;
    return std::nullopt;
  }
  // NVIDIA HGX B200 / B100 material: "up to 8 TB/s" per GPU. Newer Blackwell tables say
  // 7.7 TB/s and the driver reports 7.67 TB/s; the device-attribute peak sits beside this one.
  if (b200 || b100) return 8.0e12;
  return std::nullopt;
}

std::vector<v1::SolFigure> SolFigures(std::uint64_t bytes_moved, double measured_seconds,
                                      const std::vector<PeakBandwidth>& peaks) {
  std::vector<v1::SolFigure> figures;
  figures.reserve(peaks.size());
  for (const PeakBandwidth& peak : peaks) {
    if (!(peak.bytes_per_second > 0) || !std::isfinite(peak.bytes_per_second)) continue;
    v1::SolFigure& figure = figures.emplace_back();
    figure.set_source(peak.source);
    figure.set_peak_bytes_per_second(peak.bytes_per_second);
    const double sol_seconds = static_cast<double>(bytes_moved) / peak.bytes_per_second;
    figure.set_sol_seconds(sol_seconds);
    figure.set_sol_ratio(measured_seconds > 0 ? sol_seconds / measured_seconds : 0);
    if (figure.sol_ratio() > 1) {
      figure.set_above_peak(true);
      figure.set_above_peak_reason(AbovePeakReason(bytes_moved, measured_seconds, peak));
    }
  }
  return figures;
}

std::string AbovePeakReason(std::uint64_t bytes_moved, double measured_seconds,
                            const PeakBandwidth& peak) {
  const double rate =
      measured_seconds > 0 ? static_cast<double>(bytes_moved) / measured_seconds : 0;
  if (peak.cache_bytes > 0 && bytes_moved <= peak.cache_bytes) {
    return absl::StrCat("working set ", Bytes(static_cast<double>(bytes_moved)), " fits in the ",
                        Bytes(static_cast<double>(peak.cache_bytes)), " ", peak.cache_name,
                        ": SOL is measured against the DRAM peak");
  }
  if (peak.source == v1::PEAK_SOURCE_MEASURED_COPY) {
    // The CPU's copy peak is one measurement at server start (best of five memcpy passes);
    // it moved by 10 % between restarts of one machine (9.29 vs 10.20 GB/s).
    return absl::StrCat("peak measured at start, ", Rate(peak.bytes_per_second),
                        ", below this run's ", Rate(rate));
  }
  const char* what = peak.source == v1::PEAK_SOURCE_DATASHEET ? "datasheet" : "device-attribute";
  std::string beyond = peak.cache_bytes > 0 ? absl::StrCat(" with a working set of ",
                                                           Bytes(static_cast<double>(bytes_moved)),
                                                           ", beyond the ", peak.cache_name)
                                            : "";
  return absl::StrCat("this run's ", Rate(rate), " is above the ", what, " peak ",
                      Rate(peak.bytes_per_second), beyond,
                      ": the timer or the declared bytes are suspect");
}

std::vector<PeakBandwidth> PeaksFor(const v1::Device& device, bool with_measured_copy) {
  std::vector<PeakBandwidth> peaks;
  if (device.peak_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, device.peak_bytes_per_second()});
  }
  if (device.datasheet_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_DATASHEET, device.datasheet_bytes_per_second()});
  }
  if ((with_measured_copy || peaks.empty()) && device.measured_copy_bytes_per_second() > 0) {
    peaks.push_back({v1::PEAK_SOURCE_MEASURED_COPY, device.measured_copy_bytes_per_second()});
  }
  for (PeakBandwidth& peak : peaks) {
    peak.cache_bytes = device.l2_cache_bytes();
    peak.cache_name = device.kind() == "cuda" ? "L2 cache" : "last-level cache";
  }
  return peaks;
}

}  // namespace kerneleval::server
