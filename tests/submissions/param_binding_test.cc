// A kernel's own parameter list: the binding's rules, its check against the entry's
// parameter sizes, and the bytes a launch passes, all without a GPU. The expected values are
// the call's own (its pointers, its shape), written out here, not read back from the binder.
#include "server/submissions/param_binding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace kerneleval::server::submissions {
namespace {

using ::testing::HasSubstr;

v1::KernelParam Param(const std::string& name, v1::ParamSource source) {
  v1::KernelParam p;
  p.set_name(name);
  p.set_source(source);
  return p;
}

// The Triton add + RMSNorm of examples/submissions/triton: five pointers, a stride, the row
// length, eps, and Triton's two scratch pointers.
v1::KernelLaunch TritonKernel() {
  v1::KernelLaunch k;
  k.set_entry("add_rmsnorm");
  k.set_block_size(256);
  k.set_rows_per_block(1);
  *k.add_params() = Param("x_ptr", v1::PARAM_SOURCE_HIDDEN_STATES);
  *k.add_params() = Param("residual_ptr", v1::PARAM_SOURCE_RESIDUAL);
  *k.add_params() = Param("weight_ptr", v1::PARAM_SOURCE_WEIGHT);
  *k.add_params() = Param("out_ptr", v1::PARAM_SOURCE_OUTPUT);
  *k.add_params() = Param("residual_out_ptr", v1::PARAM_SOURCE_RESIDUAL_OUT);
  *k.add_params() = Param("stride", v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE);
  *k.add_params() = Param("n_cols", v1::PARAM_SOURCE_HIDDEN);
  *k.add_params() = Param("eps", v1::PARAM_SOURCE_EPS);
  *k.add_params() = Param("global_scratch", v1::PARAM_SOURCE_NULL);
  *k.add_params() = Param("profile_scratch", v1::PARAM_SOURCE_NULL);
  return k;
}

const std::vector<long long> kTritonSizes = {8, 8, 8, 8, 8, 4, 4, 4, 8, 8};

v1::LaunchPlan PlanOf(const v1::KernelLaunch& k) {
  v1::LaunchPlan plan;
  *plan.add_kernels() = k;
  return plan;
}

TEST(ParamBinding, TritonsListIsAccepted) {
  EXPECT_TRUE(ValidateParamBinding(PlanOf(TritonKernel()), "plan").ok());
  EXPECT_TRUE(CheckParamSizes(TritonKernel(), kTritonSizes, "k").ok());
  // 8-byte integers and fp64 floats bind as well as 4-byte ones.
  std::vector<long long> wide = kTritonSizes;
  wide[5] = wide[6] = wide[7] = 8;
  EXPECT_TRUE(CheckParamSizes(TritonKernel(), wide, "k").ok());
}

TEST(ParamBinding, WrongCountIsRefusedWithBothCounts) {
  std::vector<long long> sizes = kTritonSizes;
  sizes.pop_back();
  const absl::Status s = CheckParamSizes(TritonKernel(), sizes, "plan.kernels[0]");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("plan.kernels[0].params: 10 bound; 'add_rmsnorm' takes 9"));
}

TEST(ParamBinding, WrongSizeNamesTheParameter) {
  std::vector<long long> sizes = kTritonSizes;
  sizes[0] = 4;  // a pointer bound to a 4-byte parameter
  absl::Status s = CheckParamSizes(TritonKernel(), sizes, "k");
  EXPECT_THAT(s.message(), HasSubstr("k.params[0] ('x_ptr'): bound to hidden_states (a pointer, "
                                     "8 bytes), but the entry's parameter 0 has 4 bytes"));
  sizes = kTritonSizes;
  sizes[6] = 2;  // hidden in a 16-bit parameter
  s = CheckParamSizes(TritonKernel(), sizes, "k");
  EXPECT_THAT(s.message(), HasSubstr("k.params[6] ('n_cols'): bound to hidden (an integer"));
  v1::KernelLaunch k = TritonKernel();
  k.mutable_params(6)->set_source(v1::PARAM_SOURCE_ABI_PARAMS);
  EXPECT_THAT(CheckParamSizes(k, kTritonSizes, "k").message(),
              HasSubstr("bound to abi_params (kerneleval_params, 144 bytes)"));
}

TEST(ParamBinding, UnknownSourceIsRefusedByName) {
  v1::KernelLaunch k = TritonKernel();
  k.mutable_params(2)->set_source(static_cast<v1::ParamSource>(99));
  const absl::Status s = ValidateParamBinding(PlanOf(k), "submission.launch_plan");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("submission.launch_plan.kernels[0].params[2] ('weight_ptr')"
                                     ".source: 99 is no value the service supplies"));
  k.mutable_params(2)->set_source(v1::PARAM_SOURCE_UNSPECIFIED);
  EXPECT_THAT(ValidateParamBinding(PlanOf(k), "p").message(), HasSubstr("params[2]"));
}

TEST(ParamBinding, ScratchSizeIsBounded) {
  v1::KernelLaunch k = TritonKernel();
  k.mutable_params(8)->set_source(v1::PARAM_SOURCE_SCRATCH);
  k.mutable_params(8)->set_scratch_bytes(kMaxScratchParamBytes + 1);
  absl::Status s = ValidateParamBinding(PlanOf(k), "p");
  EXPECT_THAT(s.message(), HasSubstr("p.kernels[0].params[8] ('global_scratch').scratch_bytes: "
                                     "67108865 must be from 1 to 67108864"));
  k.mutable_params(8)->set_scratch_bytes(0);
  EXPECT_FALSE(ValidateParamBinding(PlanOf(k), "p").ok());
  k.mutable_params(8)->set_scratch_bytes(4096);
  EXPECT_TRUE(ValidateParamBinding(PlanOf(k), "p").ok());
  EXPECT_EQ(ScratchParamBytes(k), std::vector<std::uint64_t>({4096}));
}

TEST(ParamBinding, ConstantsOnlyWhereTheSourceTakesThem) {
  v1::KernelLaunch k = TritonKernel();
  k.mutable_params(6)->set_int_value(2048);  // hidden is the call's, not a constant
  EXPECT_THAT(ValidateParamBinding(PlanOf(k), "p").message(),
              HasSubstr("params[6] ('n_cols').int_value: only an int parameter takes one"));
  k = TritonKernel();
  k.mutable_params(0)->set_name("x ptr");
  EXPECT_THAT(ValidateParamBinding(PlanOf(k), "p").message(),
              HasSubstr(".name: letters, digits and _ only"));
  k = TritonKernel();
  k.mutable_params(5)->set_source(v1::PARAM_SOURCE_PLAN_SCRATCH);
  EXPECT_THAT(ValidateParamBinding(PlanOf(k), "p").message(),
              HasSubstr("plan_scratch needs a plan with needs_scratch set"));
  k = TritonKernel();
  k.mutable_params(5)->set_source(v1::PARAM_SOURCE_INT);
  k.mutable_params(5)->set_int_value(std::int64_t{1} << 40);
  EXPECT_TRUE(ValidateParamBinding(PlanOf(k), "p").ok());
  EXPECT_THAT(CheckParamSizes(k, kTritonSizes, "k").message(),
              HasSubstr("does not fit the 4-byte parameter"));
}

TEST(ParamBinding, TooManyParametersAreRefused) {
  v1::KernelLaunch k;
  k.set_entry("k");
  for (int i = 0; i <= kMaxKernelParams; ++i) *k.add_params() = Param("", v1::PARAM_SOURCE_NULL);
  EXPECT_THAT(ValidateParamBinding(PlanOf(k), "p").message(),
              HasSubstr("p.kernels[0].params: 65 parameters; at most 64"));
}

TEST(ParamBinding, NoBindingIsTheStructAbi) {
  v1::KernelLaunch k;
  k.set_entry("k");
  EXPECT_TRUE(CheckParamSizes(k, {KERNELEVAL_PARAMS_BYTES}, "k").ok());
  EXPECT_THAT(CheckParamSizes(k, {8, 4}, "k").message(),
              HasSubstr("k.entry: 'k' takes 2 parameter(s); the ABI passes exactly one"));
  // A block of ABI version 2 (136 bytes) is refused by its version.
  EXPECT_THAT(CheckParamSizes(k, {136}, "k").message(), HasSubstr("ABI version 2"));
}

template <typename T>
T Read(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

TEST(BindParams, EachParameterGetsTheCallsValue) {
  alignas(16) static char x[64], r[64], w[64], out[64], rout[64];
  FusedAddRmsNormArgs a;
  a.mode = Mode::kOutputAndResidual;
  a.hidden_states = x;
  a.residual = r;
  a.weight = w;
  a.output = out;
  a.residual_out = rout;
  a.batch = 7;
  a.hidden = 2048;
  a.eps = 1e-5f;
  CallValues call;
  call.args = &a;
  call.sm_count = 132;
  std::vector<std::size_t> sizes(kTritonSizes.begin(), kTritonSizes.end());
  ParamBlock block;
  ASSERT_TRUE(BindParams(TritonKernel(), sizes, call, &block));
  void** p = block.pointers();
  EXPECT_EQ(Read<const void*>(p[0]), x);
  EXPECT_EQ(Read<const void*>(p[1]), r);
  EXPECT_EQ(Read<const void*>(p[2]), w);
  EXPECT_EQ(Read<void*>(p[3]), out);
  EXPECT_EQ(Read<void*>(p[4]), rout);
  EXPECT_EQ(Read<std::int32_t>(p[5]), 2048);
  EXPECT_EQ(Read<std::int32_t>(p[6]), 2048);
  EXPECT_EQ(Read<float>(p[7]), 1e-5f);
  EXPECT_EQ(Read<void*>(p[8]), nullptr);
  EXPECT_EQ(Read<void*>(p[9]), nullptr);

  // In OUTPUT mode residual_out is NULL, as the struct ABI passes it.
  a.mode = Mode::kOutput;
  ASSERT_TRUE(BindParams(TritonKernel(), sizes, call, &block));
  EXPECT_EQ(Read<void*>(block.pointers()[4]), nullptr);
}

TEST(BindParams, WideAndDerivedValues) {
  FusedAddRmsNormArgs a;
  a.batch = 3;
  a.hidden = 4096;
  a.eps = 1e-6f;
  v1::KernelLaunch k;
  *k.add_params() = Param("m", v1::PARAM_SOURCE_BATCH);
  *k.add_params() = Param("inv", v1::PARAM_SOURCE_INV_HIDDEN);
  *k.add_params() = Param("eps", v1::PARAM_SOURCE_EPS);
  *k.add_params() = Param("sms", v1::PARAM_SOURCE_SM_COUNT);
  v1::KernelParam c = Param("c", v1::PARAM_SOURCE_INT);
  c.set_int_value(-5);
  *k.add_params() = c;
  v1::KernelParam f = Param("f", v1::PARAM_SOURCE_FLOAT);
  f.set_float_value(0.25);
  *k.add_params() = f;
  *k.add_params() = Param("s", v1::PARAM_SOURCE_SCRATCH);
  *k.add_params() = Param("ps", v1::PARAM_SOURCE_PLAN_SCRATCH);
  char scratch = 0, plan_scratch = 0;
  const std::vector<void*> buffers = {&scratch};
  CallValues call;
  call.args = &a;
  call.sm_count = 148;
  call.scratch_buffers = &buffers;
  call.plan_scratch = &plan_scratch;
  ParamBlock block;
  ASSERT_TRUE(BindParams(k, {8, 8, 4, 4, 8, 4, 8, 8}, call, &block));
  void** p = block.pointers();
  EXPECT_EQ(Read<std::int64_t>(p[0]), 3);
  EXPECT_EQ(Read<double>(p[1]), static_cast<double>(1.0f / 4096.0f));
  EXPECT_EQ(Read<float>(p[2]), 1e-6f);
  EXPECT_EQ(Read<std::int32_t>(p[3]), 148);
  EXPECT_EQ(Read<std::int64_t>(p[4]), -5);
  EXPECT_EQ(Read<float>(p[5]), 0.25f);
  EXPECT_EQ(Read<void*>(p[6]), &scratch);
  EXPECT_EQ(Read<void*>(p[7]), &plan_scratch);
}

TEST(BindParams, ValuesThatDoNotFitAreNeverTruncated) {
  FusedAddRmsNormArgs a;
  a.batch = std::int64_t{1} << 31;  // one past int32
  a.hidden = 1;
  v1::KernelLaunch k;
  *k.add_params() = Param("n_rows", v1::PARAM_SOURCE_BATCH);
  CallValues call;
  call.args = &a;
  ParamBlock block;
  EXPECT_FALSE(BindParams(k, {4}, call, &block));
  EXPECT_TRUE(BindParams(k, {8}, call, &block));
  EXPECT_EQ(Read<std::int64_t>(block.pointers()[0]), std::int64_t{1} << 31);
}

TEST(BindParams, StructAbiIsOneBoundBlock) {
  FusedAddRmsNormArgs a;
  a.batch = 5;
  a.hidden = 1024;
  a.eps = 1e-5f;
  CallValues call;
  call.args = &a;
  call.sm_count = 132;
  call.kernel_index = 1;
  call.kernel_count = 2;
  v1::KernelLaunch k;  // no params: the struct ABI
  ParamBlock block;
  ASSERT_TRUE(BindParams(k, {KERNELEVAL_PARAMS_BYTES}, call, &block));
  const auto* params = static_cast<const kerneleval_params*>(block.pointers()[0]);
  EXPECT_EQ(params->batch, 5);
  EXPECT_EQ(params->hidden, 1024);
  EXPECT_EQ(params->sm_count, 132);
  EXPECT_EQ(params->kernel_index, 1);
  EXPECT_EQ(params->num_kernels, 2);
  EXPECT_EQ(params->abi_version, KERNELEVAL_ABI_VERSION);
}

// A CuTe DSL tensor of layout (batch, hidden) marked dynamic, as nvidia-cutlass-dsl 4.8.1
// writes its parameter for sm_90a: `.param .align 8 .b8 p[24]` read as the pointer at +0,
// two i32 at +8 and +12 (ld.param.v2.b32) and the i64 row stride at +16.
v1::KernelParam CuteTensor(const std::string& name, v1::ParamSource pointer,
                           v1::ParamSource stride) {
  v1::KernelParam p = Param(name, v1::PARAM_SOURCE_STRUCT);
  const auto field = [&p](v1::ParamSource source, std::uint32_t bytes) {
    v1::StructField* f = p.add_fields();
    f->set_source(source);
    f->set_bytes(bytes);
    return f;
  };
  field(pointer, 0);
  field(v1::PARAM_SOURCE_BATCH, 4);
  field(v1::PARAM_SOURCE_HIDDEN, 4);
  field(stride, 8);
  return p;
}

TEST(StructParams, LayoutIsCsNaturalAlignment) {
  StructLayout layout = LayoutOf(
      CuteTensor("x", v1::PARAM_SOURCE_HIDDEN_STATES, v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE));
  EXPECT_EQ(layout.offsets, (std::vector<std::size_t>{0, 8, 12, 16}));
  EXPECT_EQ(layout.bytes, 24u);
  // {i32, i64, i32}: the i64 moves to 8 and the end rounds up to 24, as a C compiler lays out
  // struct { int a; long b; int c; }.
  v1::KernelParam p = Param("s", v1::PARAM_SOURCE_STRUCT);
  for (const std::uint32_t bytes : {4u, 8u, 4u}) {
    v1::StructField* f = p.add_fields();
    f->set_source(v1::PARAM_SOURCE_INT);
    f->set_bytes(bytes);
  }
  layout = LayoutOf(p);
  EXPECT_EQ(layout.offsets, (std::vector<std::size_t>{0, 8, 16}));
  EXPECT_EQ(layout.bytes, 24u);
  // Only 4-byte fields: 4-byte alignment, {i32, f32, i32} is 12 bytes.
  p.mutable_fields(1)->set_bytes(4);
  EXPECT_EQ(LayoutOf(p).bytes, 12u);
}

TEST(StructParams, CuteTensorsBindAndFillTheirFields) {
  v1::KernelLaunch k;
  *k.add_params() =
      CuteTensor("mX", v1::PARAM_SOURCE_HIDDEN_STATES, v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE);
  *k.add_params() = CuteTensor("mO", v1::PARAM_SOURCE_OUTPUT, v1::PARAM_SOURCE_OUTPUT_STRIDE);
  *k.add_params() = Param("eps", v1::PARAM_SOURCE_EPS);
  ASSERT_TRUE(ValidateParamBinding(PlanOf(k), "plan").ok());
  ASSERT_TRUE(CheckParamSizes(k, {24, 24, 4}, "k").ok());

  char x = 0, out = 0;
  FusedAddRmsNormArgs a;
  a.hidden_states = &x;
  a.output = &out;
  a.batch = 4099;
  a.hidden = 2048;
  a.eps = 1e-6f;
  CallValues call;
  call.args = &a;
  ParamBlock block;
  ASSERT_TRUE(BindParams(k, {24, 24, 4}, call, &block));
  const auto* bytes = static_cast<const unsigned char*>(block.pointers()[1]);
  EXPECT_EQ(Read<void*>(bytes), &out);
  EXPECT_EQ(Read<std::int32_t>(bytes + 8), 4099);
  EXPECT_EQ(Read<std::int32_t>(bytes + 12), 2048);
  EXPECT_EQ(Read<std::int64_t>(bytes + 16), 2048);
  EXPECT_EQ(Read<const void*>(block.pointers()[0]), &x);
  EXPECT_EQ(Read<float>(block.pointers()[2]), 1e-6f);

  // A batch of 2^31 rows does not fit the i32 shape field: the launch is refused.
  a.batch = std::int64_t{1} << 31;
  EXPECT_FALSE(BindParams(k, {24, 24, 4}, call, &block));
}

TEST(StructParams, SizeMismatchNamesTheStructAndBothSizes) {
  v1::KernelLaunch k;
  *k.add_params() =
      CuteTensor("mX", v1::PARAM_SOURCE_HIDDEN_STATES, v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE);
  const absl::Status s = CheckParamSizes(k, {16}, "plan.kernels[0]");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("plan.kernels[0].params[0] ('mX'): bound to struct (a "
                                     "struct of 4 field(s), 24 bytes), but the entry's "
                                     "parameter 0 has 16 bytes"));
  ParamBlock block;
  FusedAddRmsNormArgs a;
  CallValues call;
  call.args = &a;
  EXPECT_FALSE(BindParams(k, {16}, call, &block));
}

TEST(StructParams, BadFieldsAreRefusedByName) {
  const auto refusal = [](const v1::KernelParam& p) {
    v1::KernelLaunch k;
    *k.add_params() = p;
    return std::string(ValidateParamBinding(PlanOf(k), "plan").message());
  };
  v1::KernelParam p =
      CuteTensor("mX", v1::PARAM_SOURCE_HIDDEN_STATES, v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE);
  v1::KernelParam bad = p;
  bad.mutable_fields(1)->set_bytes(2);
  EXPECT_THAT(refusal(bad), HasSubstr("plan.kernels[0].params[0] ('mX').fields[1].bytes: 2; "
                                      "batch takes 4 (i32) or 8 (i64)"));
  bad = p;
  bad.mutable_fields(0)->set_bytes(4);
  EXPECT_THAT(refusal(bad), HasSubstr("fields[0].bytes: 4; hidden_states takes 0 or 8"));
  bad = p;
  bad.mutable_fields(2)->set_source(v1::PARAM_SOURCE_SCRATCH);
  EXPECT_THAT(refusal(bad), HasSubstr("fields[2].source: scratch cannot be a struct's field"));
  bad = p;
  bad.mutable_fields(2)->set_source(v1::PARAM_SOURCE_STRUCT);
  EXPECT_THAT(refusal(bad), HasSubstr("fields[2].source: struct cannot be a struct's field"));
  bad = p;
  bad.mutable_fields(3)->set_source(v1::PARAM_SOURCE_INT);
  bad.mutable_fields(3)->set_bytes(4);
  bad.mutable_fields(3)->set_int_value(std::int64_t{1} << 40);
  EXPECT_THAT(refusal(bad), HasSubstr("fields[3].int_value: 1099511627776 does not fit"));
  bad = p;
  bad.mutable_fields(1)->set_float_value(1.5);
  EXPECT_THAT(refusal(bad), HasSubstr("fields[1].float_value: only a float field takes one"));
  bad = Param("none", v1::PARAM_SOURCE_STRUCT);
  EXPECT_THAT(refusal(bad), HasSubstr("params[0] ('none').fields: 0 fields; a struct has 1 to 16"));
  bad = Param("n", v1::PARAM_SOURCE_BATCH);
  *bad.add_fields() = p.fields(0);
  EXPECT_THAT(refusal(bad), HasSubstr(".fields: only a struct parameter takes fields"));
  v1::KernelLaunch many;
  for (int i = 0; i <= kMaxStructParams; ++i) *many.add_params() = p;
  EXPECT_THAT(ValidateParamBinding(PlanOf(many), "plan").message(),
              HasSubstr("params[16] ('mX').source: at most 16 struct parameters"));
}

}  // namespace
}  // namespace kerneleval::server::submissions
