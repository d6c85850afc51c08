// The CPU implementation against the fp64 reference on awkward shapes, every dtype and mode.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval {
namespace {

struct Case {
  DType dtype;
  Mode mode;
  std::int64_t batch;
  std::int64_t hidden;
};

std::vector<std::uint8_t> RandomBytes(DType dtype, std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::uint8_t> bytes(n * ElementSize(dtype));
  for (std::size_t i = 0; i < n; ++i) StoreFromFloat(dtype, bytes.data(), i, normal(rng));
  return bytes;
}

// Tolerance: one rounding of a value of magnitude |ref| plus fp32 accumulation error.
double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 1e-2;
    case DType::kFP16:
      return 2e-3;
    case DType::kFP32:
      return 1e-5;
  }
  return 0;
}

void ExpectClose(DType dtype, const void* actual, const std::vector<double>& expected,
                 const char* what) {
  const double tol = Tolerance(dtype);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double got = LoadAsFloat(dtype, actual, i);
    ASSERT_TRUE(std::isfinite(got)) << what << "[" << i << "] is not finite (unwritten?)";
    ASSERT_LE(std::abs(got - expected[i]), tol + tol * std::abs(expected[i]))
        << what << "[" << i << "]: got " << got << ", reference " << expected[i];
  }
}

class CpuVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(CpuVsReference, MatchesFp64Reference) {
  const Case c = GetParam();
  std::mt19937_64 rng(c.batch * 1000003 + c.hidden * 31 + static_cast<int>(c.dtype) * 7 +
                      static_cast<int>(c.mode));
  const std::size_t n = static_cast<std::size_t>(c.batch * c.hidden);
  auto x = RandomBytes(c.dtype, n, rng);
  auto r = RandomBytes(c.dtype, n, rng);
  const auto w = RandomBytes(c.dtype, static_cast<std::size_t>(c.hidden), rng);

  std::vector<double> ref_out(n), ref_res(n);
  FusedAddRmsNormReference(c.dtype, c.batch, c.hidden, 1e-6, x.data(), r.data(), w.data(),
                           ref_out.data(), ref_res.data());

  // Outputs are poisoned with NaN so that an unwritten element fails.
  const std::size_t bytes = n * ElementSize(c.dtype);
  std::vector<std::uint8_t> out(bytes, 0xff), res_out(bytes, 0xff);
  FusedAddRmsNormArgs args;
  args.dtype = c.dtype;
  args.mode = c.mode;
  args.batch = c.batch;
  args.hidden = c.hidden;
  args.eps = 1e-6f;
  args.hidden_states = x.data();
  args.residual = r.data();
  args.weight = w.data();
  args.output = out.data();
  args.residual_out = WritesResidual(c.mode) ? res_out.data() : nullptr;
  const auto x_before = x;
  const auto r_before = r;
  if (c.mode == Mode::kInPlace) {
    args.output = x.data();
    args.residual_out = r.data();
  }
  FusedAddRmsNormCpu(args);

  ExpectClose(c.dtype, args.output, ref_out, "output");
  if (WritesResidual(c.mode)) ExpectClose(c.dtype, args.residual_out, ref_res, "residual_out");
  if (c.mode != Mode::kInPlace) {
    EXPECT_EQ(x, x_before) << "hidden_states was modified";
    EXPECT_EQ(r, r_before) << "residual was modified";
  }
  if (c.mode == Mode::kOutput) {
    EXPECT_TRUE(
        std::all_of(res_out.begin(), res_out.end(), [](std::uint8_t b) { return b == 0xff; }));
  }
}

TEST_P(CpuVsReference, UnfusedBaselineWithinTolerance) {
  const Case c = GetParam();
  std::mt19937_64 rng(c.batch * 17 + c.hidden);
  const std::size_t n = static_cast<std::size_t>(c.batch * c.hidden);
  auto x = RandomBytes(c.dtype, n, rng);
  auto r = RandomBytes(c.dtype, n, rng);
  const auto w = RandomBytes(c.dtype, static_cast<std::size_t>(c.hidden), rng);
  std::vector<double> ref_out(n), ref_res(n);
  FusedAddRmsNormReference(c.dtype, c.batch, c.hidden, 1e-6, x.data(), r.data(), w.data(),
                           ref_out.data(), ref_res.data());
  const std::size_t bytes = n * ElementSize(c.dtype);
  std::vector<std::uint8_t> out(bytes, 0xff), res_out(bytes, 0xff), scratch(bytes);
  FusedAddRmsNormArgs args{
      c.dtype,  c.mode,   c.batch,  c.hidden,   1e-6f,
      x.data(), r.data(), w.data(), out.data(), WritesResidual(c.mode) ? res_out.data() : nullptr};
  if (c.mode == Mode::kInPlace) {
    args.output = x.data();
    args.residual_out = r.data();
  }
  UnfusedAddRmsNormCpu(args, scratch.data());
  ExpectClose(c.dtype, args.output, ref_out, "output");
  if (WritesResidual(c.mode)) ExpectClose(c.dtype, args.residual_out, ref_res, "residual_out");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32})
    for (Mode mode : {Mode::kOutput, Mode::kOutputAndResidual, Mode::kInPlace})
      for (std::int64_t hidden : {1, 7, 111, 2048, 5000})
        for (std::int64_t batch : {1, 3, 257}) cases.push_back({dtype, mode, batch, hidden});
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(DTypeName(c.dtype)) + "_" + ModeName(c.mode) + "_b" + std::to_string(c.batch) +
         "_h" + std::to_string(c.hidden);
}

INSTANTIATE_TEST_SUITE_P(AwkwardShapes, CpuVsReference, ::testing::ValuesIn(AllCases()), CaseName);

TEST(HalfConversion, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.00390625f), 0x3f80);  // halfway between 0x3f80 and 0x3f81: even
  EXPECT_EQ(FloatToBf16(1.01171875f), 0x3f82);  // halfway between 0x3f81 and 0x3f82: even
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(65504.f), 0x7bff);
  EXPECT_EQ(FloatToFp16(65520.f), 0x7c00);                 // rounds to inf
  EXPECT_EQ(FloatToFp16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive fp16 round-trips
    ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<std::uint16_t>(h))), h) << h;
  }
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(NAN))));
}

TEST(BytesMoved, CountsEachDeclaredTensorOnce) {
  EXPECT_EQ(BytesMoved(DType::kBF16, Mode::kOutput, 12383, 2048), 152166400u);
  EXPECT_EQ(BytesMoved(DType::kBF16, Mode::kOutput, 1, 2048), 16384u);
  EXPECT_EQ(BytesMoved(DType::kBF16, Mode::kInPlace, 1, 2048), 2u * (4 * 2048 + 2048));
  EXPECT_EQ(BytesMoved(DType::kFP32, Mode::kOutputAndResidual, 2048, 1024),
            4u * (4u * 2048 * 1024 + 1024));
}

}  // namespace
}  // namespace kerneleval
