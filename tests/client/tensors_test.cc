// Tensor helpers: sizes, names and the deterministic random inputs.
#include "client/tensors.h"

#include <cmath>

#include <gtest/gtest.h>

#include "common/bounded_text.h"
#include "common/conversions.h"
#include "common/input_generator.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval::client {
namespace {

TEST(Tensors, MakeTensorKeepsDtypeShapeAndBytes) {
  const v1::Tensor t = MakeTensor(v1::DTYPE_FP16, {2, 3}, std::vector<uint8_t>(12, 7));
  EXPECT_EQ(t.dtype(), v1::DTYPE_FP16);
  ASSERT_EQ(t.shape_size(), 2);
  EXPECT_EQ(t.shape(1), 3);
  EXPECT_EQ(t.data(), std::string(12, '\x07'));
}

TEST(Tensors, RandomTensorIsDeterministicAndRoughlyStandardNormal) {
  const v1::Tensor a = RandomTensor(v1::DTYPE_FP32, {1001}, 42);
  const v1::Tensor b = RandomTensor(v1::DTYPE_FP32, {1001}, 42);
  const v1::Tensor c = RandomTensor(v1::DTYPE_FP32, {1001}, 43);
  ASSERT_EQ(a.data().size(), 1001u * 4);
  EXPECT_EQ(a.data(), b.data());
  EXPECT_NE(a.data(), c.data());
  double sum = 0, sum_sq = 0;
  for (size_t i = 0; i < 1001; ++i) {
    const float v = LoadAsFloat(::kerneleval::DType::kFP32, a.data().data(), i);
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += v * v;
  }
  EXPECT_NEAR(sum / 1001, 0.0, 0.15);
  EXPECT_NEAR(sum_sq / 1001, 1.0, 0.2);
}

TEST(Tensors, ExpectedBytesRejectsNegativeAndOverflow) {
  EXPECT_EQ(ExpectedBytes(v1::DTYPE_BF16, {16254, 2048}), int64_t{16254} * 2048 * 2);
  EXPECT_FALSE(ExpectedBytes(v1::DTYPE_BF16, {-1}).has_value());
  EXPECT_FALSE(ExpectedBytes(v1::DTYPE_FP32, {int64_t{1} << 40, int64_t{1} << 40}).has_value());
  EXPECT_FALSE(ExpectedBytes(v1::DTYPE_UNSPECIFIED, {1}).has_value());
}

TEST(Tensors, ParsesNames) {
  EXPECT_EQ(ParseDTypeName("bf16"), v1::DTYPE_BF16);
  EXPECT_EQ(ParseDTypeName("float32"), v1::DTYPE_FP32);
  EXPECT_FALSE(ParseDTypeName("int8").has_value());
  EXPECT_EQ(ParseModeName("in_place"), v1::MODE_IN_PLACE);
  EXPECT_FALSE(ParseModeName("both").has_value());
}

// The CLI's --seed promises the tensors the server generates for workload 0 of a suite run
// with that seed: one generator, not two that round differently.
TEST(Tensors, RandomInputsAreTheServersWorkloadInputs) {
  v1::RunRequest request;
  SetRandomInputs(v1::DTYPE_BF16, 3, 5, 200, &request);
  const auto expected =
      ::kerneleval::RandomTensor(::kerneleval::DType::kBF16, 15, DeriveSeed(200, "residual", 0));
  EXPECT_EQ(request.residual().data(), std::string(expected.begin(), expected.end()));
  EXPECT_EQ(request.weight().shape_size(), 1);
  EXPECT_EQ(request.hidden_states().data().size(), 30u);
}

TEST(BoundedText, QuotesShortTextAndBoundsLongText) {
  EXPECT_EQ(Quote("cuda:0"), "'cuda:0'");
  EXPECT_EQ(Quote("a\x01"), "'a\\x01'");
  const std::string quoted = Quote(std::string(10240, 'x'));
  EXPECT_LT(quoted.size(), 100u);
  EXPECT_NE(quoted.find("(10240 bytes)"), std::string::npos);
  google::protobuf::RepeatedField<std::int64_t> shape;
  for (int i = 0; i < 100000; ++i) shape.Add(1);
  EXPECT_EQ(ShapeText(shape), "[1, 1, 1, 1, 1, 1, 1, 1, ...] (100000 dims)");
}

}  // namespace
}  // namespace kerneleval::client
