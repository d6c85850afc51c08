// Speed of light (SOL) for a memory-bound operation: the time the declared bytes need at a
// peak DRAM bandwidth, and how close a measured latency comes to it.
//
//   T_sol = bytes_moved / peak_bytes_per_second
//   sol_ratio = T_sol / T_measured          (SOL % = 100 * sol_ratio)
//
// Compute never binds for fused add + RMSNorm (a few FLOP per element against >= 6 bytes), so
// the bandwidth floor is the whole roofline, as in NVIDIA SOLAR for ops without tensor-core
// work. Pure functions; safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

// Peak DRAM bandwidth from the device attributes: memory clock x 2 (double data rate) x bus
// width / 8, in bytes per second. `memory_clock_khz` is cudaDevAttrMemoryClockRate (kHz),
// `bus_width_bits` is cudaDevAttrGlobalMemoryBusWidth. An H200 reports 3,201,000 kHz and
// 6016 bits: 4.814e12 B/s. Returns 0 when either input is <= 0 (unknown).
double AttributePeakBytesPerSecond(std::int64_t memory_clock_khz, int bus_width_bits);

// The vendor datasheet's DRAM bandwidth for a CUDA device name (cudaDeviceProp::name, e.g.
// "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"), matched case-insensitively on
// whole words so that "GH200" is not taken for "H200". Known: H200 (SXM and NVL) 4.8e12,
// H100 SXM ("SXM" or "HBM3" in the name) 3.35e12, H100 PCIe 2.0e12, H100 NVL 3.9e12,
// B200 8.0e12, B100 8.0e12 bytes per second. nullopt for any other name, including a bare
// "H100" whose variant cannot be told.
std::optional<double> DatasheetPeakBytesPerSecond(std::string_view model);

struct PeakBandwidth {
  v1::PeakSource source = v1::PEAK_SOURCE_UNSPECIFIED;
  double bytes_per_second = 0;
  // The device's cache in front of DRAM (a GPU's L2, a CPU's last-level cache; 0 unknown) and
  // its name in a sentence: what explains a SOL figure above 100 %.
  std::uint64_t cache_bytes = 0;
  std::string cache_name = "cache";
};

// The peaks a device's SOL figures use, in report order: device attributes, datasheet, and
// the measured copy bandwidth when asked for or when it is the only one (a CPU has neither
// attributes nor a datasheet, so its copy bandwidth is its reference). Each carries the
// device's cache (Device.l2_cache_bytes).
std::vector<PeakBandwidth> PeaksFor(const v1::Device& device, bool with_measured_copy);

// One SOL figure per peak, in the order given; peaks that are <= 0 or not finite are skipped.
// `measured_seconds` is the latency compared against (the median); when it is <= 0 the
// figure carries sol_seconds and a sol_ratio of 0. A figure above 100 % is flagged
// (above_peak) with the reason (AbovePeakReason).
std::vector<v1::SolFigure> SolFigures(std::uint64_t bytes_moved, double measured_seconds,
                                      const std::vector<PeakBandwidth>& peaks);

// Why `bytes_moved` in `measured_seconds` beat `peak`, in one line: the working set fits in
// the cache in front of DRAM; else a measured copy peak that came out low at start; else a
// rate above a fixed peak with the working set beyond the cache, which the timer or the
// declared bytes must explain.
std::string AbovePeakReason(std::uint64_t bytes_moved, double measured_seconds,
                            const PeakBandwidth& peak);

}  // namespace kerneleval::server
