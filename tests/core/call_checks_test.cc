// The checks of every call of a submitted kernel, the parts a CPU can check: which calls a
// protocol checks and when, the guard regions, the input repeats, what a failed check says,
// and that Evaluate turns the checks on for submissions only and reports a failed one as
// the verification failure that makes a result REJECTED.
#include "server/device/call_checks.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "server/evaluation/evaluation.h"
#include "server/figures/correctness.h"

namespace kerneleval::server {
namespace {

Problem Make(DType dtype, Mode mode, std::int64_t batch, std::int64_t hidden) {
  Problem p;
  p.dtype = dtype;
  p.mode = mode;
  p.batch = batch;
  p.hidden = hidden;
  return p;
}

MeasureOptions Protocol(bool cold, bool graph, std::uint32_t warmup, std::uint32_t reps) {
  MeasureOptions o;
  o.cold = cold;
  o.graph = graph;
  o.warmup = warmup;
  o.repetitions = reps;
  return o;
}

const Problem kH2048 = Make(DType::kBF16, Mode::kOutput, 64, 2048);

// The plan with room for every slot (the third argument of PlanCallChecks is the slots'
// memory budget).
CallCheckPlan Plan(const Problem& p, const MeasureOptions& o) {
  absl::StatusOr<CallCheckPlan> plan = PlanCallChecks(p, o, std::size_t{1} << 40);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : CallCheckPlan{};
}

TEST(CallCheckPlan, ColdChecksEveryWarmUpAndTimedCall) {
  const CallCheckPlan plan = Plan(kH2048, Protocol(true, false, 10, 50));
  EXPECT_EQ(plan.timing, CallCheckTiming::kEveryCall);
  EXPECT_EQ(plan.records, 60u);
  EXPECT_TRUE(plan.check_outputs);
  EXPECT_TRUE(plan.check_inputs);
}

TEST(CallCheckPlan, AdaptiveReservesTheMaximum) {
  MeasureOptions o = Protocol(true, false, 5, 50);
  o.adaptive.enabled = true;
  o.adaptive.max_samples = 1000;
  EXPECT_EQ(Plan(kH2048, o).records, 1005u);
}

TEST(CallCheckPlan, HotAndGraphCheckEveryCallInItsOwnSlot) {
  for (const MeasureOptions& o : {Protocol(false, false, 10, 50), Protocol(false, true, 10, 50),
                                  Protocol(true, true, 3, 9)}) {
    const CallCheckPlan plan = Plan(kH2048, o);
    EXPECT_EQ(plan.timing, CallCheckTiming::kChained);
    EXPECT_TRUE(plan.check_outputs);
    EXPECT_TRUE(plan.check_inputs);
    EXPECT_EQ(plan.slot_tensors, 1u);  // OUTPUT: the output alone
    // A slot: the tensor (64 x 2048 bf16) and its guard.
    EXPECT_EQ(plan.slot_stride, 64u * 2048 * 2 + 65536);
    EXPECT_EQ(plan.records, plan.batch_calls + 1);
  }
  // Hot without a graph: every call of the measurement in one batch where they fit; graph
  // replay: one replay per batch.
  EXPECT_EQ(Plan(kH2048, Protocol(false, false, 10, 50)).batch_calls, 60u);
  MeasureOptions g = Protocol(false, true, 10, 50);
  g.graph_calls = 50;
  EXPECT_EQ(Plan(kH2048, g).batch_calls, 50u);
  EXPECT_EQ(Plan(kH2048, Protocol(false, false, 0, 1)).batch_calls, 1u);
  EXPECT_EQ(
      Plan(Make(DType::kFP32, Mode::kOutputAndResidual, 8, 4096), Protocol(false, false, 1, 1))
          .slot_tensors,
      2u);
}

TEST(CallCheckPlan, SlotsBeyondTheBudgetMakeMoreBatchesOrARefusal) {
  const std::size_t slot = 64u * 2048 * 2 + 65536;
  // Hot: 60 calls, room for 7 slots: batches of 7.
  absl::StatusOr<CallCheckPlan> hot =
      PlanCallChecks(kH2048, Protocol(false, false, 10, 50), 7 * slot + slot / 2);
  ASSERT_TRUE(hot.ok()) << hot.status();
  EXPECT_EQ(hot->batch_calls, 7u);
  // Not even one slot: refused, never unchecked.
  EXPECT_EQ(PlanCallChecks(kH2048, Protocol(false, false, 10, 50), slot - 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  // A graph replay's calls cannot be split: refused, naming the field.
  MeasureOptions g = Protocol(false, true, 10, 50);
  g.graph_calls = 20;
  const absl::Status graph = PlanCallChecks(kH2048, g, 19 * slot).status();
  EXPECT_EQ(graph.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(graph.message().find("protocol.graph_calls: 20 calls"), std::string::npos) << graph;
  EXPECT_TRUE(PlanCallChecks(kH2048, g, 20 * slot).ok());
}

TEST(CallCheckPlan, InPlaceSlotsHoldTheirOwnInputs) {
  const Problem p = Make(DType::kFP16, Mode::kInPlace, 3, 111);
  const CallCheckPlan cold = Plan(p, Protocol(true, false, 1, 2));
  EXPECT_TRUE(cold.check_outputs);
  EXPECT_FALSE(cold.check_inputs);
  // Hot: each call's hidden_states and residual are its slot's, generated for it, so its
  // outputs are checked like every other call's.
  const CallCheckPlan hot = Plan(p, Protocol(false, false, 1, 2));
  EXPECT_TRUE(hot.check_outputs);
  EXPECT_FALSE(hot.check_inputs);
  EXPECT_EQ(hot.slot_tensors, 2u);
}

TEST(CallCheckPlan, OutputAndResidualChecksInputsToo) {
  const Problem p = Make(DType::kFP32, Mode::kOutputAndResidual, 2048, 8192);
  EXPECT_TRUE(Plan(p, Protocol(true, false, 10, 20)).check_inputs);
}

TEST(CallCheckGuards, AtLeastOneRowAndSixtyFourKiB) {
  EXPECT_EQ(GuardBytes(kH2048), 65536u);
  EXPECT_EQ(GuardBytes(Make(DType::kBF16, Mode::kOutput, 1, 7)), 65536u);
  EXPECT_EQ(GuardBytes(Make(DType::kFP32, Mode::kOutputAndResidual, 2048, 32768)), 131072u);
  const std::size_t odd = GuardBytes(Make(DType::kFP32, Mode::kOutput, 1, 20001));
  EXPECT_GE(odd, 80004u);
  EXPECT_EQ(odd % 256, 0u);
}

TEST(CallCheckNames, NameWarmUpTimedAndChainedCalls) {
  const MeasureOptions o = Protocol(true, false, 10, 50);
  const CallCheckPlan plan = Plan(kH2048, o);
  EXPECT_EQ(CheckedCallName(plan, o, 0), "warm-up call 1 of 10");
  EXPECT_EQ(CheckedCallName(plan, o, 9), "warm-up call 10 of 10");
  EXPECT_EQ(CheckedCallName(plan, o, 10), "timed call 1 of 50");
  EXPECT_EQ(CheckedCallName(plan, o, 59), "timed call 50 of 50");
  MeasureOptions g = Protocol(false, true, 10, 50);
  g.graph_calls = 20;
  EXPECT_EQ(ChainedCallName(g, {false, 1, 2, 20}), "call 3 of 20 of warm-up replay 2 of 10");
  EXPECT_EQ(ChainedCallName(g, {false, 59, 19, 20}), "call 20 of 20 of timed replay 50 of 50");
  EXPECT_EQ(ChainedCallName(g, {true, 0, 0, 20}),
            "call 1 of 20 of the graph's first launch before the warm-up");
  EXPECT_EQ(ChainedCallName(g, {true, 10, 4, 20}),
            "call 5 of 20 of the graph's first launch before the timed replays");
  const MeasureOptions h = Protocol(false, false, 10, 50);
  EXPECT_EQ(ChainedCallName(h, {false, 3, 0, 1}), "warm-up call 4 of 10");
  EXPECT_EQ(ChainedCallName(h, {false, 12, 0, 1}), "timed call 3 of 50");
}

CallCheckCounts Clean() { return CallCheckCounts{}; }

TEST(CallCheckFindings, NothingFoundIsEmpty) {
  const CallCheckPlan plan = Plan(kH2048, Protocol(true, false, 1, 1));
  EXPECT_EQ(DescribeCallCheck(Clean(), kH2048, plan, DefaultTolerance(DType::kBF16)), "");
}

TEST(CallCheckFindings, WrongOutputNamesRowAndColumn) {
  const CallCheckPlan plan = Plan(kH2048, Protocol(true, false, 1, 1));
  CallCheckCounts c = Clean();
  c.bad[kCheckOutput] = 2048;
  c.nonfinite[kCheckOutput] = 2048;
  c.first_bad_complement[kCheckOutput] = ~(32ull * 2048 + 5);
  const std::string s = DescribeCallCheck(c, kH2048, plan, DefaultTolerance(DType::kBF16));
  EXPECT_NE(s.find("output[32, 5] wrong (2048 of 131072 elements"), std::string::npos) << s;
  EXPECT_NE(s.find("2048 NaN or Inf"), std::string::npos) << s;
}

TEST(CallCheckFindings, MatchedRatioIsHonouredButNeverForNaN) {
  const CallCheckPlan plan = Plan(kH2048, Protocol(true, false, 1, 1));
  v1::Tolerance lenient = DefaultTolerance(DType::kBF16);
  lenient.set_required_matched_ratio(0.99);
  CallCheckCounts c = Clean();
  c.bad[kCheckResidualOut] = 10;  // of 131072: 99.99% matched
  c.first_bad_complement[kCheckResidualOut] = ~0ull;
  EXPECT_EQ(DescribeCallCheck(c, kH2048, plan, lenient), "");
  c.nonfinite[kCheckResidualOut] = 1;
  EXPECT_NE(DescribeCallCheck(c, kH2048, plan, lenient).find("residual_out[0, 0] wrong"),
            std::string::npos);
}

TEST(CallCheckFindings, ChangedInputsFailOutsideInPlace) {
  CallCheckCounts c = Clean();
  c.bad[kCheckResidual] = 3;
  c.first_bad_complement[kCheckResidual] = ~(2048ull + 1);
  const CallCheckPlan plan = Plan(kH2048, Protocol(true, false, 1, 1));
  EXPECT_EQ(DescribeCallCheck(c, kH2048, plan, DefaultTolerance(DType::kBF16)),
            "input residual changed by the call (3 elements, first [1, 1])");
  const Problem in_place = Make(DType::kBF16, Mode::kInPlace, 64, 2048);
  EXPECT_EQ(DescribeCallCheck(c, in_place, Plan(in_place, Protocol(true, false, 1, 1)),
                              DefaultTolerance(DType::kBF16)),
            "");
  c.bad[kCheckWeight] = 1;
  c.first_bad_complement[kCheckWeight] = ~7ull;
  EXPECT_NE(DescribeCallCheck(c, in_place, Plan(in_place, Protocol(true, false, 1, 1)),
                              DefaultTolerance(DType::kBF16))
                .find("input weight changed by the call (1 elements, first [7])"),
            std::string::npos);
}

TEST(CallCheckFindings, GuardChangesAreWritesPastATensor) {
  CallCheckCounts c = Clean();
  c.guard_changed[kCheckOutput] = 16;
  c.first_guard_complement[kCheckOutput] = ~0ull;
  const CallCheckPlan plan = Plan(kH2048, Protocol(false, true, 1, 1));
  EXPECT_EQ(DescribeCallCheck(c, kH2048, plan, DefaultTolerance(DType::kBF16)),
            "wrote past the end of output (16 bytes of the guard region after it changed, the "
            "first 0 bytes past its end)");
}

TEST(CallCheckRepeats, NeverFirstAtLeastOneInEightAboutOneInFour) {
  for (std::uint64_t seed : {0ull, 1ull, 0x1234567890abcdefull, ~0ull}) {
    EXPECT_FALSE(RepeatsInputs(seed, 0));
    int repeats = 0, since = 0;
    for (std::uint64_t call = 1; call < 4000; ++call) {
      const bool r = RepeatsInputs(seed, call);
      repeats += r;
      since = r ? 0 : since + 1;
      ASSERT_LT(since, 8) << "seed " << seed << " call " << call;
    }
    EXPECT_GT(repeats, 4000 / 4);  // a quarter drawn, plus the forced ones
    EXPECT_LT(repeats, 4000 / 2);
  }
  // The draw depends on the seed: two seeds do not repeat the same calls.
  int same = 0;
  for (std::uint64_t call = 1; call < 200; ++call) {
    same += RepeatsInputs(1, call) == RepeatsInputs(2, call);
  }
  EXPECT_LT(same, 199);
}

TEST(CallCheckSeeds, DistinctPerProcessDrawCallAndTensor) {
  std::set<std::uint64_t> seeds;
  for (int i = 0; i < 100; ++i) seeds.insert(SecretSeed());
  EXPECT_EQ(seeds.size(), 100u);
  std::set<std::uint64_t> tensors;
  for (std::uint64_t call = 0; call < 50; ++call) {
    for (int t = 0; t < 2 * kCheckTensors; ++t) tensors.insert(CallTensorSeed(42, call, t));
  }
  EXPECT_EQ(tensors.size(), 50u * 2 * kCheckTensors);
}

// Answers every Measure with correct outputs (the CPU implementation) and, when asked to
// check calls, with `failure`; records what it was asked.
class CheckingBackend final : public Backend {
 public:
  explicit CheckingBackend(std::string failure) : failure_(std::move(failure)) {}
  const std::string& name() const override { return name_; }
  v1::Device Describe() const override {
    v1::Device d;
    d.set_name(name_);
    d.set_kind("cpu");
    return d;
  }
  std::vector<v1::Implementation> Implementations() const override { return {}; }
  absl::Status WarmUp() override { return absl::OkStatus(); }
  absl::StatusOr<Measurement> Measure(const Problem& problem, const HostInputs& inputs,
                                      const HostOutputs& outputs, const std::string&,
                                      const MeasureOptions& options) override {
    asked.push_back(options);
    FusedAddRmsNormArgs a;
    a.dtype = problem.dtype;
    a.mode = problem.mode;
    a.batch = problem.batch;
    a.hidden = problem.hidden;
    a.eps = problem.eps;
    a.hidden_states = inputs.hidden_states;
    a.residual = inputs.residual;
    a.weight = inputs.weight;
    a.output = outputs.output;
    a.residual_out = outputs.residual_out;
    FusedAddRmsNormCpu(a);
    Measurement m;
    m.samples_seconds = {1e-6};
    if (options.check_calls) {
      m.calls_checked = 60;
      m.call_check_failure = failure_;
    }
    return m;
  }
  double MeasuredCopyBandwidth() const override { return 0; }
  v1::Clocks ReadClocks(bool* available) override {
    *available = false;
    return {};
  }
  std::vector<MeasureOptions> asked;

 private:
  std::string name_ = "cpu";
  std::string failure_;
};

EvaluationSpec SpecFor(const std::vector<std::uint8_t>& x, const std::vector<std::uint8_t>& w,
                       std::vector<std::uint8_t>* out, int rounds) {
  EvaluationSpec spec;
  spec.problem = Make(DType::kFP32, Mode::kOutput, 2, 16);
  spec.inputs = {x.data(), x.data(), w.data()};
  spec.outputs = {out->data(), nullptr};
  spec.implementation = "sub-0123";
  spec.tolerance = DefaultTolerance(DType::kFP32);
  spec.verification_rounds = rounds;
  return spec;
}

TEST(CallCheckEvaluation, OnForSubmissionsOnlyWithTheResolvedTolerance) {
  const std::vector<std::uint8_t> x(2 * 16 * 4, 0), w(16 * 4, 0);
  std::vector<std::uint8_t> out(2 * 16 * 4, 0xff);
  CheckingBackend builtin("");
  ASSERT_TRUE(Evaluate(builtin, SpecFor(x, w, &out, 0)).ok());
  ASSERT_EQ(builtin.asked.size(), 1u);
  EXPECT_FALSE(builtin.asked[0].check_calls);

  CheckingBackend submitted("");
  absl::StatusOr<Evaluation> e = Evaluate(submitted, SpecFor(x, w, &out, 3));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->verification_failure, "");
  ASSERT_EQ(submitted.asked.size(), 4u);  // the measurement and three verification rounds
  for (const MeasureOptions& o : submitted.asked) {
    EXPECT_TRUE(o.check_calls);
    EXPECT_DOUBLE_EQ(o.check_tolerance.atol(), DefaultTolerance(DType::kFP32).atol());
  }
  EXPECT_EQ(e->measurement.calls_checked, 60u);
}

TEST(CallCheckEvaluation, AFailedCallIsTheVerificationFailure) {
  const std::vector<std::uint8_t> x(2 * 16 * 4, 0), w(16 * 4, 0);
  std::vector<std::uint8_t> out(2 * 16 * 4, 0xff);
  CheckingBackend cheat("timed call 7 of 50: output[1, 3] wrong (16 of 32 elements ...)");
  absl::StatusOr<Evaluation> e = Evaluate(cheat, SpecFor(x, w, &out, 3));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->verification_failure,
            "timed call 7 of 50: output[1, 3] wrong (16 of 32 elements ...)");
  EXPECT_EQ(cheat.asked.size(), 1u);  // no verification round after a failed call
}

}  // namespace
}  // namespace kerneleval::server
