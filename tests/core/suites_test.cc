#include "common/suites.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "nlohmann/json.hpp"

namespace kerneleval::server {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;

// A valid bf16 OUTPUT suite that each malformed case changes in one place.
json ValidSuite() {
  return json::parse(R"({
    "name": "test_suite", "op_type": "fused_add_rmsnorm", "mode": "output", "eps": 1e-6,
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 2048}},
    "inputs": {
      "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
      "residual": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
      "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    "workloads": [{"axes": {"batch_size": 1}}, {"axes": {"batch_size": 79}},
                  {"axes": {"batch_size": 12383}}]
  })");
}

// Parses `suite` and returns the error message (empty when it parsed).
std::string ParseError(const json& suite) {
  const absl::StatusOr<v1::SuiteDefinition> parsed = ParseSuiteJson(suite.dump(), "bad.json");
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

TEST(LoadSuiteDirectory, ShippedSuitesLoad) {
  const auto suites = LoadSuiteDirectory(KERNELEVAL_SUITES_DIR);
  ASSERT_TRUE(suites.ok()) << suites.status();
  ASSERT_EQ(suites->size(), 4u);

  const v1::SuiteDefinition& h2048 = (*suites)[0];
  EXPECT_EQ(h2048.name(), "fused_add_rmsnorm_h2048");
  EXPECT_EQ(h2048.dtype(), v1::DTYPE_BF16);
  EXPECT_EQ(h2048.mode(), v1::MODE_OUTPUT);
  EXPECT_EQ(h2048.eps(), 1e-6);
  EXPECT_THAT(h2048.tags(), testing::Contains("source:flashinfer-bench"));
  std::vector<std::string> names;
  std::vector<std::int64_t> batches;
  for (const v1::Workload& w : h2048.workloads()) {
    names.push_back(WorkloadName(h2048, w));
    const auto shape = ResolveShape(h2048, w);
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_EQ(shape->hidden, 2048);
    batches.push_back(shape->batch);
  }
  EXPECT_EQ(batches, (std::vector<std::int64_t>{1, 6, 34, 64, 79, 12383, 16254}));
  EXPECT_EQ(names[4], "batch_size=79");
  EXPECT_EQ(BytesMoved(DType::kBF16, Mode::kOutput, batches[5], 2048), 152166400u);

  const v1::SuiteDefinition& liger = (*suites)[1];
  EXPECT_EQ(liger.name(), "liger_fused_add_rmsnorm");
  EXPECT_EQ(liger.dtype(), v1::DTYPE_FP32);
  EXPECT_EQ(liger.mode(), v1::MODE_OUTPUT_AND_RESIDUAL);
  std::vector<std::int64_t> hiddens;
  for (const v1::Workload& w : liger.workloads()) {
    const auto shape = ResolveShape(liger, w);
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_EQ(shape->batch, 2048);
    hiddens.push_back(shape->hidden);
  }
  EXPECT_EQ(hiddens, (std::vector<std::int64_t>{1024, 2048, 4096, 8192, 16384, 32768}));
  EXPECT_EQ(WorkloadName(liger, liger.workloads(0)), "hidden_size=1024");

  // The LLM widths, in place and output only: the same 24 bf16 shapes.
  const v1::Mode llm_modes[] = {v1::MODE_IN_PLACE, v1::MODE_OUTPUT};
  for (int i = 0; i < 2; ++i) {
    const v1::SuiteDefinition& llm = (*suites)[2 + i];
    EXPECT_EQ(llm.dtype(), v1::DTYPE_BF16);
    EXPECT_EQ(llm.mode(), llm_modes[i]);
    std::set<std::int64_t> llm_hiddens;
    std::set<std::int64_t> llm_batches;
    for (const v1::Workload& w : llm.workloads()) {
      const auto shape = ResolveShape(llm, w);
      ASSERT_TRUE(shape.ok()) << shape.status();
      llm_hiddens.insert(shape->hidden);
      llm_batches.insert(shape->batch);
    }
    EXPECT_EQ(llm.workloads_size(), 24);
    EXPECT_EQ(llm_hiddens, (std::set<std::int64_t>{4096, 5120, 7168, 8192}));
    EXPECT_EQ(llm_batches, (std::set<std::int64_t>{1, 16, 128, 1024, 4096, 16384}));
  }
  EXPECT_EQ((*suites)[2].name(), "llm_widths_bf16_in_place");
  EXPECT_EQ((*suites)[3].name(), "llm_widths_bf16_output");
}

TEST(ParseSuiteJson, ValidSuiteHasDefaultsAndDeclaredFields) {
  json j = ValidSuite();
  j.erase("eps");
  j.erase("mode");
  j["workloads"][1]["name"] = "decode";
  j["workloads"][1]["seed"] = 7;
  j["workloads"][1]["inputs"] = {{"hidden_states", {{"type", "random"}}}};
  j["workloads"][1]["tolerance"] = {{"max_atol", 0.02}, {"required_matched_ratio", 0.99}};
  const auto suite = ParseSuiteJson(j.dump(), "ok.json");
  ASSERT_TRUE(suite.ok()) << suite.status();
  EXPECT_EQ(suite->eps(), kDefaultEps);
  EXPECT_EQ(suite->mode(), v1::MODE_OUTPUT);
  ASSERT_EQ(suite->axes_size(), 2);
  EXPECT_EQ(suite->axes(0).name(), "batch_size");
  EXPECT_FALSE(suite->axes(0).is_const());
  EXPECT_EQ(suite->axes(1).value(), 2048);
  const v1::Workload& w = suite->workloads(1);
  EXPECT_EQ(WorkloadName(*suite, w), "decode");
  EXPECT_EQ(w.seed(), 7u);
  EXPECT_EQ(w.tolerance().atol(), 0.02);
  EXPECT_EQ(w.tolerance().rtol(), 0);  // Unset: the dtype's default applies later.
  EXPECT_EQ(w.tolerance().required_matched_ratio(), 0.99);
}

TEST(ParseSuiteJson, InPlaceDeclaresBothOutputs) {
  json j = ValidSuite();
  j["mode"] = "in_place";
  j["outputs"]["residual_out"] = {{"shape", {"batch_size", "hidden_size"}}, {"dtype", "bfloat16"}};
  const auto suite = ParseSuiteJson(j.dump(), "ok.json");
  ASSERT_TRUE(suite.ok()) << suite.status();
  EXPECT_EQ(suite->mode(), v1::MODE_IN_PLACE);
}

TEST(SuiteErrors, ParseErrorGivesFileLineAndColumn) {
  const auto suite = ParseSuiteJson("{\n  \"name\": \"x\",\n  \"axes\": {,\n}", "broken.json");
  ASSERT_FALSE(suite.ok());
  EXPECT_EQ(suite.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(suite.status().message(), HasSubstr("broken.json: invalid JSON"));
  EXPECT_THAT(suite.status().message(), HasSubstr("line 3, column"));
}

TEST(SuiteErrors, UnknownDtype) {
  json j = ValidSuite();
  j["inputs"]["weight"]["dtype"] = "float8_e4m3fn";
  EXPECT_THAT(ParseError(j),
              HasSubstr("bad.json: inputs.weight.dtype: unknown dtype 'float8_e4m3fn'"));
}

TEST(SuiteErrors, InconsistentDtypes) {
  json j = ValidSuite();
  j["inputs"]["residual"]["dtype"] = "float16";
  EXPECT_THAT(ParseError(j), HasSubstr("inputs.residual.dtype: float16 differs from "
                                       "inputs.hidden_states's bfloat16"));
  j = ValidSuite();
  j["outputs"]["output"]["dtype"] = "float32";
  EXPECT_THAT(ParseError(j), HasSubstr("outputs.output.dtype: float32 differs"));
}

TEST(SuiteErrors, MissingAxis) {
  json j = ValidSuite();
  j["axes"].erase("hidden_size");
  EXPECT_THAT(ParseError(j), HasSubstr("bad.json: axes: missing axis hidden_size"));
}

TEST(SuiteErrors, UnknownSuiteAxis) {
  json j = ValidSuite();
  j["axes"]["seq_len"] = {{"type", "var"}};
  EXPECT_THAT(ParseError(j), HasSubstr("axes.seq_len: unknown axis"));
}

TEST(SuiteErrors, NonPositiveConstAxis) {
  json j = ValidSuite();
  j["axes"]["hidden_size"]["value"] = 0;
  EXPECT_THAT(ParseError(j),
              HasSubstr("axes.hidden_size.value: must be an integer in 1..2147483647, got 0"));
}

TEST(SuiteErrors, NonPositiveWorkloadAxis) {
  json j = ValidSuite();
  j["workloads"][2]["axes"]["batch_size"] = -3;
  EXPECT_THAT(ParseError(j),
              HasSubstr("workloads[2].axes.batch_size: must be an integer in 1..2147483647, "
                        "got -3"));
}

TEST(SuiteErrors, FractionalAxisValue) {
  json j = ValidSuite();
  j["workloads"][0]["axes"]["batch_size"] = 64.5;
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[0].axes.batch_size: must be an integer"));
}

TEST(SuiteErrors, AxisValueAboveLimit) {
  json j = ValidSuite();
  j["workloads"][0]["axes"]["batch_size"] = 2147483648LL;
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[0].axes.batch_size: must be an integer in "
                                       "1..2147483647, got 2147483648"));
}

TEST(SuiteErrors, WorkloadWithUnknownAxis) {
  json j = ValidSuite();
  j["workloads"][1]["axes"]["seq_len"] = 4;
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[1].axes.seq_len: unknown axis"));
}

TEST(SuiteErrors, WorkloadSettingAConstAxis) {
  json j = ValidSuite();
  j["workloads"][1]["axes"]["hidden_size"] = 4096;
  EXPECT_THAT(ParseError(j),
              HasSubstr("workloads[1].axes.hidden_size: hidden_size is a const axis (2048)"));
}

TEST(SuiteErrors, WorkloadMissingVarAxis) {
  json j = ValidSuite();
  j["workloads"][2]["axes"] = json::object();
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[2].axes: missing var axis batch_size"));
}

TEST(SuiteErrors, DuplicateWorkloadName) {
  json j = ValidSuite();
  j["workloads"][2]["axes"]["batch_size"] = 1;
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[2].name: duplicate workload name "
                                       "'batch_size=1' (also workloads[0])"));
  j = ValidSuite();
  j["workloads"][0]["name"] = "small";
  j["workloads"][1]["name"] = "small";
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[1].name: duplicate workload name 'small'"));
}

TEST(SuiteErrors, ModeOutputsMismatch) {
  json j = ValidSuite();
  j["mode"] = "output_and_residual";
  EXPECT_THAT(ParseError(j), HasSubstr("outputs: missing tensor residual_out; mode "
                                       "output_and_residual writes: output, residual_out"));
  j = ValidSuite();
  j["outputs"]["residual_out"] = j["outputs"]["output"];
  EXPECT_THAT(ParseError(j),
              HasSubstr("outputs.residual_out: unexpected tensor; mode output writes: output"));
  j = ValidSuite();
  j["mode"] = "in_place";
  EXPECT_THAT(ParseError(j), HasSubstr("outputs: missing tensor residual_out; mode in_place"));
}

TEST(SuiteErrors, UnknownMode) {
  json j = ValidSuite();
  j["mode"] = "inplace";
  EXPECT_THAT(ParseError(j), HasSubstr("mode: unknown mode 'inplace'"));
}

TEST(SuiteErrors, BatchTimesHiddenOverflow) {
  json j = ValidSuite();
  j["axes"]["hidden_size"]["value"] = 2147483647;
  j["workloads"][0]["axes"]["batch_size"] = 2147483647;
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[0]: batch_size 2147483647 x hidden_size "
                                       "2147483647 is too large"));
}

TEST(SuiteErrors, WrongTensorShape) {
  json j = ValidSuite();
  j["inputs"]["weight"]["shape"] = {"batch_size", "hidden_size"};
  EXPECT_THAT(ParseError(j), HasSubstr("inputs.weight.shape: must be [\"hidden_size\"]"));
}

TEST(SuiteErrors, MissingInputTensor) {
  json j = ValidSuite();
  j["inputs"].erase("residual");
  EXPECT_THAT(ParseError(j), HasSubstr("inputs: missing tensor residual"));
}

TEST(SuiteErrors, WrongOpType) {
  json j = ValidSuite();
  j["op_type"] = "rmsnorm";
  EXPECT_THAT(ParseError(j), HasSubstr("op_type: must be \"fused_add_rmsnorm\""));
}

TEST(SuiteErrors, UnknownField) {
  json j = ValidSuite();
  j["workloads"][0]["toleranse"] = json::object();
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[0].toleranse: unknown field"));
}

TEST(SuiteErrors, MissingRequiredField) {
  json j = ValidSuite();
  j.erase("workloads");
  EXPECT_THAT(ParseError(j), HasSubstr("bad.json: missing field workloads"));
}

TEST(SuiteErrors, NoWorkloads) {
  json j = ValidSuite();
  j["workloads"] = json::array();
  EXPECT_THAT(ParseError(j), HasSubstr("workloads: at least one workload is required"));
}

TEST(SuiteErrors, BadSuiteName) {
  json j = ValidSuite();
  j["name"] = "my suite";
  EXPECT_THAT(ParseError(j), HasSubstr("name: must be 1..128 characters of [A-Za-z0-9_.-]"));
}

TEST(SuiteErrors, NonPositiveEps) {
  json j = ValidSuite();
  j["eps"] = 0;
  EXPECT_THAT(ParseError(j), HasSubstr("eps: must be finite and > 0, got 0"));
}

TEST(SuiteErrors, ToleranceOutOfRange) {
  json j = ValidSuite();
  j["workloads"][1]["tolerance"] = {{"required_matched_ratio", 1.5}};
  EXPECT_THAT(
      ParseError(j),
      HasSubstr("workloads[1].tolerance.required_matched_ratio: must be in [0, 1], got 1.5"));
  j["workloads"][1]["tolerance"] = {{"max_atol", -0.1}};
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[1].tolerance.max_atol: must be >= 0"));
}

TEST(SuiteErrors, UnsupportedInputKind) {
  json j = ValidSuite();
  j["workloads"][0]["inputs"] = {{"weight", {{"type", "safetensors"}}}};
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[0].inputs.weight.type: only \"random\" inputs "
                                       "are supported, got 'safetensors'"));
}

TEST(SuiteErrors, PerTensorSeedPointsToWorkloadSeed) {
  json j = ValidSuite();
  j["workloads"][0]["inputs"] = {{"hidden_states", {{"type", "random"}, {"seed", 1}}}};
  EXPECT_THAT(ParseError(j), HasSubstr("workloads[0].inputs.hidden_states.seed: per-tensor seeds "
                                       "are not supported; set workloads[0].seed"));
}

TEST(SuiteErrors, DuplicateJsonKey) {
  const std::string text = R"({"name": "a", "axes": {"batch_size": {"type": "var"},
                               "batch_size": {"type": "var"}}})";
  const auto suite = ParseSuiteJson(text, "dup.json");
  ASSERT_FALSE(suite.ok());
  EXPECT_THAT(suite.status().message(),
              HasSubstr("dup.json: duplicate key 'batch_size' in the object under 'axes'"));
}

TEST(SuiteErrors, TopLevelNotAnObject) {
  EXPECT_THAT(ParseError(json::array()), HasSubstr("a suite is a JSON object, got array"));
}

TEST(ValidateSuite, CustomSuiteMessagesNameTheRequestField) {
  const auto parsed = ParseSuiteJson(ValidSuite().dump(), "ok.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  v1::SuiteDefinition suite = *parsed;
  EXPECT_TRUE(ValidateSuite(suite, "custom_suite").ok());
  suite.mutable_workloads(2)->mutable_axes()->clear();
  const absl::Status status = ValidateSuite(suite, "custom_suite");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "custom_suite.workloads[2].axes: missing var axis batch_size");
}

TEST(ValidateSuite, ProtoOnlyRules) {
  v1::SuiteDefinition suite = *ParseSuiteJson(ValidSuite().dump(), "ok.json");
  suite.clear_name();  // A custom suite may come without a name.
  EXPECT_TRUE(ValidateSuite(suite, "custom_suite").ok());

  v1::SuiteDefinition bad = suite;
  bad.set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(),
              HasSubstr("custom_suite.dtype: required (DTYPE_BF16, DTYPE_FP16 or DTYPE_FP32)"));
  bad = suite;
  bad.set_eps(-1);
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(), HasSubstr("custom_suite.eps"));
  bad = suite;
  bad.mutable_axes(0)->set_name("rows");
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(),
              HasSubstr("custom_suite.axes[0]: unknown axis 'rows'"));
  bad = suite;
  *bad.add_axes() = suite.axes(1);
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(),
              HasSubstr("custom_suite.axes[2]: duplicate axis hidden_size"));
  bad = suite;
  bad.mutable_axes(1)->set_value(-5);
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(),
              HasSubstr("custom_suite.axes[1].value: hidden_size must be in 1..2147483647"));
  bad = suite;
  bad.mutable_workloads(0)->mutable_tolerance()->set_rtol(std::nan(""));
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(),
              HasSubstr("custom_suite.workloads[0].tolerance.rtol: must be finite and >= 0"));
  bad = suite;
  for (int i = 0; i < kMaxWorkloads; ++i) {
    (*bad.add_workloads()->mutable_axes())["batch_size"] = 100 + i;
  }
  EXPECT_THAT(ValidateSuite(bad, "custom_suite").message(),
              HasSubstr("custom_suite.workloads: at most 1024 workloads"));
}

TEST(ResolveShape, ConstAndVarAxes) {
  const v1::SuiteDefinition suite = *ParseSuiteJson(ValidSuite().dump(), "ok.json");
  const auto shape = ResolveShape(suite, suite.workloads(1));
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->batch, 79);
  EXPECT_EQ(shape->hidden, 2048);
  EXPECT_FALSE(ResolveShape(suite, v1::Workload()).ok());
}

TEST(WorkloadName, BothAxesVarAndAllConst) {
  v1::SuiteDefinition suite;
  v1::Axis* batch = suite.add_axes();
  batch->set_name("batch_size");
  v1::Axis* hidden = suite.add_axes();
  hidden->set_name("hidden_size");
  v1::Workload w;
  (*w.mutable_axes())["hidden_size"] = 4096;
  (*w.mutable_axes())["batch_size"] = 2;
  EXPECT_EQ(WorkloadName(suite, w), "batch_size=2,hidden_size=4096");
  batch->set_is_const(true);
  batch->set_value(8);
  hidden->set_is_const(true);
  hidden->set_value(16);
  EXPECT_EQ(WorkloadName(suite, v1::Workload()), "batch_size=8,hidden_size=16");
}

class SuiteDirectoryTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(SuiteDirectoryTest, LoadsJsonFilesInNameOrderAndIgnoresOthers) {
  json b = ValidSuite();
  b["name"] = "b_suite";
  json a = ValidSuite();
  a["name"] = "z_suite";
  Write("b.json", b.dump());
  Write("a.json", a.dump());
  Write("README.md", "not a suite");
  const auto suites = LoadSuiteDirectory(dir_.string());
  ASSERT_TRUE(suites.ok()) << suites.status();
  ASSERT_EQ(suites->size(), 2u);
  EXPECT_EQ((*suites)[0].name(), "z_suite");  // From a.json.
  EXPECT_EQ((*suites)[1].name(), "b_suite");
}

TEST_F(SuiteDirectoryTest, DuplicateSuiteNamesAreRejected) {
  Write("a.json", ValidSuite().dump());
  Write("b.json", ValidSuite().dump());
  const auto suites = LoadSuiteDirectory(dir_.string());
  ASSERT_FALSE(suites.ok());
  EXPECT_EQ(suites.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(suites.status().message(), HasSubstr("b.json: name: suite \"test_suite\" is already "
                                                   "defined in"));
  EXPECT_THAT(suites.status().message(), HasSubstr("a.json"));
}

TEST_F(SuiteDirectoryTest, BadFileIsNamed) {
  Write("a.json", ValidSuite().dump());
  json bad = ValidSuite();
  bad["name"] = "other";
  bad["inputs"]["weight"]["dtype"] = "bf16";
  Write("b.json", bad.dump());
  const auto suites = LoadSuiteDirectory(dir_.string());
  ASSERT_FALSE(suites.ok());
  EXPECT_THAT(suites.status().message(),
              HasSubstr("b.json: inputs.weight.dtype: unknown dtype 'bf16'"));
}

TEST_F(SuiteDirectoryTest, MissingDirectoryIsNotFound) {
  const auto suites = LoadSuiteDirectory((dir_ / "absent").string());
  ASSERT_FALSE(suites.ok());
  EXPECT_EQ(suites.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kerneleval::server
