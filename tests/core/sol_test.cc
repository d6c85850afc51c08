#include "server/sol.h"

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

}  // namespace
}  // namespace kerneleval::server
