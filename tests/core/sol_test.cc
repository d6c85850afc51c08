#include "server/figures/sol.h"

#include "gtest/gtest.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval::server {
namespace {

TEST(AttributePeak, H200FromClockAndBusWidth) {
  // 3,201,000 kHz x 2 x 6016 bit / 8 = 4.814304e12 B/s.
  EXPECT_DOUBLE_EQ(AttributePeakBytesPerSecond(3201000, 6016), 4.814304e12);
}

TEST(AttributePeak, UnknownInputsGiveZero) {
  EXPECT_EQ(AttributePeakBytesPerSecond(0, 6016), 0);
  EXPECT_EQ(AttributePeakBytesPerSecond(3201000, 0), 0);
  EXPECT_EQ(AttributePeakBytesPerSecond(-1, 6016), 0);
}

TEST(DatasheetPeak, KnownDeviceNames) {
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H200"), 4.8e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H200 NVL"), 4.8e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H100 80GB HBM3"), 3.35e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H100 SXM5 80GB"), 3.35e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H100 PCIe"), 2.0e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H100 NVL"), 3.9e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA B200"), 8.0e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA B100"), 8.0e12);
}

TEST(DatasheetPeak, MatchesCaseInsensitively) {
  EXPECT_EQ(DatasheetPeakBytesPerSecond("nvidia h200"), 4.8e12);
  EXPECT_EQ(DatasheetPeakBytesPerSecond("NVIDIA H100 PCIE"), 2.0e12);
}

TEST(DatasheetPeak, UnknownOrAmbiguousNamesHaveNone) {
  EXPECT_FALSE(DatasheetPeakBytesPerSecond("").has_value());
  EXPECT_FALSE(DatasheetPeakBytesPerSecond("NVIDIA A100-SXM4-80GB").has_value());
  // Grace Hopper's name contains "H200" as a substring; it is not an H200.
  EXPECT_FALSE(DatasheetPeakBytesPerSecond("NVIDIA GH200 480GB").has_value());
  EXPECT_FALSE(DatasheetPeakBytesPerSecond("NVIDIA GB200").has_value());
  // Which H100 cannot be told.
  EXPECT_FALSE(DatasheetPeakBytesPerSecond("NVIDIA H100").has_value());
}

TEST(SolFigures, H2048AtBatch12383OnH200) {
  const std::uint64_t bytes = BytesMoved(DType::kBF16, Mode::kOutput, 12383, 2048);
  ASSERT_EQ(bytes, 152166400u);  // 2 * (3 * 12383 * 2048 + 2048)
  const double peak = AttributePeakBytesPerSecond(3201000, 6016);
  const auto figures = SolFigures(bytes, 35e-6, {{v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, peak}});
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].source(), v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
  EXPECT_EQ(figures[0].peak_bytes_per_second(), peak);
  // 152166400 / 4.814304e12 = 31.6071 us; 31.6071 / 35 = 0.90306.
  EXPECT_NEAR(figures[0].sol_seconds(), 31.6071e-6, 0.0001e-6);
  EXPECT_NEAR(figures[0].sol_ratio(), 0.90306, 0.00001);
}

TEST(SolFigures, OneFigurePerUsablePeakInOrder) {
  const auto figures = SolFigures(4800, 2e-9,
                                  {{v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, 0},
                                   {v1::PEAK_SOURCE_DATASHEET, 4.8e12},
                                   {v1::PEAK_SOURCE_MEASURED_COPY, -1},
                                   {v1::PEAK_SOURCE_MEASURED_COPY, 2.4e12}});
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].source(), v1::PEAK_SOURCE_DATASHEET);
  EXPECT_DOUBLE_EQ(figures[0].sol_seconds(), 1e-9);
  EXPECT_DOUBLE_EQ(figures[0].sol_ratio(), 0.5);
  EXPECT_EQ(figures[1].source(), v1::PEAK_SOURCE_MEASURED_COPY);
  EXPECT_DOUBLE_EQ(figures[1].sol_seconds(), 2e-9);
  EXPECT_DOUBLE_EQ(figures[1].sol_ratio(), 1.0);
}

TEST(SolFigures, NoMeasurementGivesZeroRatio) {
  const auto figures = SolFigures(4800, 0, {{v1::PEAK_SOURCE_DATASHEET, 4.8e12}});
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_DOUBLE_EQ(figures[0].sol_seconds(), 1e-9);
  EXPECT_EQ(figures[0].sol_ratio(), 0);
}

TEST(SolFigures, AtOrBelowThePeakIsNotFlagged) {
  // Exactly 100 % is possible; only a rate beyond the peak needs a reason.
  const auto figures = SolFigures(4800, 1e-9, {{v1::PEAK_SOURCE_DATASHEET, 4.8e12, 1 << 20}});
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_DOUBLE_EQ(figures[0].sol_ratio(), 1.0);
  EXPECT_FALSE(figures[0].above_peak());
  EXPECT_EQ(figures[0].above_peak_reason(), "");
}

TEST(SolFigures, AboveThePeakWithAWorkingSetInCacheNamesTheCache) {
  // The CPU report of the issue: 12 MiB moved against a 9.29 GB/s copy peak at 251 %.
  const std::uint64_t bytes = 12u << 20;
  const double peak = 9.29e9;
  const double seconds = static_cast<double>(bytes) / (2.51 * peak);
  const auto figures = SolFigures(
      bytes, seconds, {{v1::PEAK_SOURCE_MEASURED_COPY, peak, 32u << 20, "last-level cache"}});
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_NEAR(figures[0].sol_ratio(), 2.51, 1e-9);
  EXPECT_TRUE(figures[0].above_peak());
  EXPECT_EQ(figures[0].above_peak_reason(),
            "working set 12 MiB fits in the 32 MiB last-level cache: SOL is measured against "
            "the DRAM peak");
}

TEST(SolFigures, AboveAMeasuredPeakBeyondTheCacheBlamesThePeak) {
  // 64 MiB does not fit in 32 MiB: the copy peak measured at start came out low.
  const std::uint64_t bytes = 64u << 20;
  const double seconds = static_cast<double>(bytes) / 11.2e9;
  const auto figures = SolFigures(
      bytes, seconds, {{v1::PEAK_SOURCE_MEASURED_COPY, 9.29e9, 32u << 20, "last-level cache"}});
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_TRUE(figures[0].above_peak());
  EXPECT_EQ(figures[0].above_peak_reason(),
            "peak measured at start, 9.29 GB/s, below this run's 11.20 GB/s");
}

TEST(SolFigures, AboveAFixedPeakBeyondTheCacheSuspectsTheMeasurement) {
  const std::uint64_t bytes = 152166400;  // 145 MiB on a 50 MiB L2
  const auto figures = SolFigures(bytes, static_cast<double>(bytes) / 5.1e12,
                                  {{v1::PEAK_SOURCE_DATASHEET, 4.8e12, 50u << 20, "L2 cache"},
                                   {v1::PEAK_SOURCE_MEASURED_COPY, 6e12, 50u << 20, "L2 cache"}});
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_TRUE(figures[0].above_peak());
  EXPECT_EQ(figures[0].above_peak_reason(),
            "this run's 5.10 TB/s is above the datasheet peak 4.80 TB/s with a working set of "
            "145 MiB, beyond the L2 cache: the timer or the declared bytes are suspect");
  // The same result is below the other peak: only the figure above it is flagged.
  EXPECT_FALSE(figures[1].above_peak());
}

TEST(PeaksFor, CarriesTheDeviceCacheForTheReason) {
  v1::Device cpu;
  cpu.set_kind("cpu");
  cpu.set_l2_cache_bytes(32u << 20);
  cpu.set_measured_copy_bytes_per_second(9.29e9);
  const auto cpu_peaks = PeaksFor(cpu, false);
  ASSERT_EQ(cpu_peaks.size(), 1u);
  EXPECT_EQ(cpu_peaks[0].source, v1::PEAK_SOURCE_MEASURED_COPY);
  EXPECT_EQ(cpu_peaks[0].cache_bytes, 32u << 20);
  EXPECT_EQ(cpu_peaks[0].cache_name, "last-level cache");

  v1::Device gpu;
  gpu.set_kind("cuda");
  gpu.set_l2_cache_bytes(50u << 20);
  gpu.set_peak_bytes_per_second(4.8e12);
  gpu.set_datasheet_bytes_per_second(4.8e12);
  const auto gpu_peaks = PeaksFor(gpu, false);
  ASSERT_EQ(gpu_peaks.size(), 2u);
  for (const PeakBandwidth& p : gpu_peaks) EXPECT_EQ(p.cache_name, "L2 cache");
}

}  // namespace
}  // namespace kerneleval::server
