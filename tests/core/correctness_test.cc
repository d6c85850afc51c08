#include "server/figures/correctness.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval::server {
namespace {

using ::testing::HasSubstr;

// A bf16 tensor holding `values` rounded to bf16, and the values as the fp64 reference.
struct Bf16Case {
  explicit Bf16Case(const std::vector<double>& values) : actual(values.size()), expected(values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      actual[i] = FloatToBf16(static_cast<float>(values[i]));
    }
  }
  void Set(std::size_t i, float v) { actual[i] = FloatToBf16(v); }
  v1::Correctness Check(const v1::Tolerance& tol, std::string_view name = "output") const {
    return CheckAgainstReference(DType::kBF16, actual.data(), expected.data(), expected.size(), tol,
                                 name);
  }
  std::vector<std::uint16_t> actual;
  std::vector<double> expected;
};

TEST(DefaultTolerance, PerDtype) {
  const v1::Tolerance bf16 = DefaultTolerance(DType::kBF16);
  EXPECT_EQ(bf16.atol(), 1e-2);
  EXPECT_EQ(bf16.rtol(), 1e-2);
  EXPECT_EQ(bf16.required_matched_ratio(), 1.0);
  const v1::Tolerance fp16 = DefaultTolerance(DType::kFP16);
  EXPECT_EQ(fp16.atol(), 2e-3);
  EXPECT_EQ(fp16.rtol(), 2e-3);
  const v1::Tolerance fp32 = DefaultTolerance(DType::kFP32);
  EXPECT_EQ(fp32.atol(), 1e-5);
  EXPECT_EQ(fp32.rtol(), 1e-5);
  EXPECT_EQ(fp32.required_matched_ratio(), 1.0);
}

TEST(ResolveTolerance, ZeroFieldsFallBackToDefaults) {
  v1::Tolerance requested;
  requested.set_rtol(0.05);
  const v1::Tolerance tol = ResolveTolerance(DType::kBF16, requested);
  EXPECT_EQ(tol.atol(), 1e-2);
  EXPECT_EQ(tol.rtol(), 0.05);
  EXPECT_EQ(tol.required_matched_ratio(), 1.0);

  requested.set_required_matched_ratio(0.99);
  EXPECT_EQ(ResolveTolerance(DType::kFP32, requested).required_matched_ratio(), 0.99);
  EXPECT_EQ(ResolveTolerance(DType::kFP32, requested).atol(), 1e-5);
}

TEST(CheckAgainstReference, ExactMatchPasses) {
  const Bf16Case c({0.5, -1.25, 2.0, 0.0, 3.0});
  const v1::Correctness r = c.Check(DefaultTolerance(DType::kBF16));
  EXPECT_TRUE(r.checked());
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.max_abs_error(), 0);
  EXPECT_EQ(r.max_rel_error(), 0);
  EXPECT_EQ(r.matched_ratio(), 1.0);
  EXPECT_EQ(r.mismatched(), 0u);
  EXPECT_FALSE(r.has_nan());
  EXPECT_FALSE(r.has_inf());
  EXPECT_TRUE(r.detail().empty());
  EXPECT_EQ(r.tolerance().atol(), 1e-2);
}

TEST(CheckAgainstReference, OneElementOffFailsAndNamesItsIndex) {
  Bf16Case c({0.5, -1.25, 2.0, 0.0, 3.0});
  c.Set(3, 0.5f);
  const v1::Correctness r = c.Check(DefaultTolerance(DType::kBF16));
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.mismatched(), 1u);
  EXPECT_DOUBLE_EQ(r.matched_ratio(), 0.8);
  EXPECT_DOUBLE_EQ(r.max_abs_error(), 0.5);
  // |d| / max(|ref|, atol) = 0.5 / 0.01.
  EXPECT_DOUBLE_EQ(r.max_rel_error(), 50);
  EXPECT_THAT(r.detail(), HasSubstr("output[3]: got 0.5, expected 0"));
  EXPECT_THAT(r.detail(), HasSubstr("1 of 5 elements"));
}

TEST(CheckAgainstReference, ErrorWithinAtolPlusRtolPasses) {
  // ref 2.0: the bound is 0.01 + 0.01 * 2 = 0.03; bf16 2.015625 is 0.015625 away.
  Bf16Case c({2.0});
  c.Set(0, 2.015625f);
  const v1::Correctness r = c.Check(DefaultTolerance(DType::kBF16));
  EXPECT_TRUE(r.passed());
  EXPECT_DOUBLE_EQ(r.max_abs_error(), 0.015625);
  EXPECT_DOUBLE_EQ(r.max_rel_error(), 0.015625 / 2.0);
  // ... and 2.03125 is past it.
  c.Set(0, 2.03125f);
  EXPECT_FALSE(c.Check(DefaultTolerance(DType::kBF16)).passed());
}

TEST(CheckAgainstReference, NanFails) {
  Bf16Case c({1, 2, 3});
  c.Set(1, std::numeric_limits<float>::quiet_NaN());
  v1::Tolerance loose = DefaultTolerance(DType::kBF16);
  loose.set_required_matched_ratio(0.5);  // The ratio would pass; NaN must still fail.
  const v1::Correctness r = c.Check(loose);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(r.has_nan());
  EXPECT_FALSE(r.has_inf());
  EXPECT_EQ(r.mismatched(), 1u);
  EXPECT_THAT(r.detail(), HasSubstr("output[1]: got nan"));
}

TEST(CheckAgainstReference, InfFails) {
  Bf16Case c({1, 2, 3});
  c.Set(2, -std::numeric_limits<float>::infinity());
  v1::Tolerance loose = DefaultTolerance(DType::kBF16);
  loose.set_required_matched_ratio(0.5);
  const v1::Correctness r = c.Check(loose);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(r.has_inf());
  EXPECT_FALSE(r.has_nan());
  EXPECT_THAT(r.detail(), HasSubstr("output[2]: got -inf"));
}

TEST(CheckAgainstReference, NonFiniteReferenceFails) {
  Bf16Case c({1, 2});
  c.expected[0] = std::numeric_limits<double>::quiet_NaN();
  const v1::Correctness r = c.Check(DefaultTolerance(DType::kBF16));
  EXPECT_FALSE(r.passed());
  EXPECT_THAT(r.detail(), HasSubstr("reference is not finite"));
}

TEST(CheckAgainstReference, MatchedRatioRule) {
  std::vector<double> values(200);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * static_cast<double>(i % 7);
  Bf16Case c(values);
  v1::Tolerance tol = DefaultTolerance(DType::kBF16);
  tol.set_required_matched_ratio(0.99);

  c.Set(10, 100.0f);  // 199 / 200 = 0.995 >= 0.99
  v1::Correctness r = c.Check(tol);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.mismatched(), 1u);
  EXPECT_DOUBLE_EQ(r.matched_ratio(), 0.995);
  EXPECT_THAT(r.detail(), HasSubstr("output[10]"));  // Reported even when the ratio passes.

  c.Set(20, 100.0f);  // 198 / 200 = 0.99: still passes
  EXPECT_TRUE(c.Check(tol).passed());
  c.Set(30, 100.0f);  // 197 / 200 = 0.985 < 0.99
  r = c.Check(tol);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.mismatched(), 3u);

  // The default ratio 1.0 lets no element through.
  EXPECT_FALSE(c.Check(DefaultTolerance(DType::kBF16)).passed());
}

TEST(CheckAgainstReference, Fp32AndFp16Tensors) {
  const std::vector<float> f32 = {1.0f, 1.0f + 1e-6f};
  const std::vector<double> expected = {1.0, 1.0};
  EXPECT_TRUE(CheckAgainstReference(DType::kFP32, f32.data(), expected.data(), 2,
                                    DefaultTolerance(DType::kFP32))
                  .passed());
  const std::vector<float> f32_off = {1.0f, 1.0001f};
  EXPECT_FALSE(CheckAgainstReference(DType::kFP32, f32_off.data(), expected.data(), 2,
                                     DefaultTolerance(DType::kFP32))
                   .passed());
  const std::vector<std::uint16_t> f16 = {FloatToFp16(1.0f), FloatToFp16(1.00097656f)};
  EXPECT_TRUE(CheckAgainstReference(DType::kFP16, f16.data(), expected.data(), 2,
                                    DefaultTolerance(DType::kFP16))
                  .passed());
}

TEST(CheckAgainstReference, EmptyTensorPasses) {
  const v1::Correctness r =
      CheckAgainstReference(DType::kBF16, nullptr, nullptr, 0, DefaultTolerance(DType::kBF16));
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.matched_ratio(), 1.0);
}

TEST(MergeCorrectness, FailsWhenEitherTensorFails) {
  const Bf16Case good({1, 2, 3, 4});
  Bf16Case bad({1, 2, 3, 4});
  bad.Set(2, 5.0f);
  const v1::Tolerance tol = DefaultTolerance(DType::kBF16);
  const v1::Correctness merged =
      MergeCorrectness(good.Check(tol, "output"), bad.Check(tol, "residual_out"));
  EXPECT_TRUE(merged.checked());
  EXPECT_FALSE(merged.passed());
  EXPECT_EQ(merged.mismatched(), 1u);
  EXPECT_DOUBLE_EQ(merged.matched_ratio(), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(merged.max_abs_error(), 2.0);
  EXPECT_THAT(merged.detail(), HasSubstr("residual_out[2]: got 5, expected 3"));
}

TEST(MergeCorrectness, CombinesFlagsAndDetails) {
  Bf16Case a({1, 2});
  a.Set(0, std::numeric_limits<float>::quiet_NaN());
  Bf16Case b({1, 2});
  b.Set(1, std::numeric_limits<float>::infinity());
  const v1::Tolerance tol = DefaultTolerance(DType::kBF16);
  const v1::Correctness merged =
      MergeCorrectness(a.Check(tol, "output"), b.Check(tol, "residual_out"));
  EXPECT_FALSE(merged.passed());
  EXPECT_TRUE(merged.has_nan());
  EXPECT_TRUE(merged.has_inf());
  EXPECT_THAT(merged.detail(), HasSubstr("output[0]"));
  EXPECT_THAT(merged.detail(), HasSubstr("residual_out[1]"));
}

TEST(MergeCorrectness, UncheckedSideIsIgnored) {
  const Bf16Case good({1, 2});
  const v1::Correctness checked = good.Check(DefaultTolerance(DType::kBF16));
  const v1::Correctness merged = MergeCorrectness(v1::Correctness(), checked);
  EXPECT_TRUE(merged.checked());
  EXPECT_TRUE(merged.passed());
  EXPECT_TRUE(MergeCorrectness(checked, v1::Correctness()).passed());
}

}  // namespace
}  // namespace kerneleval::server
