// One judge for Run and Benchmark: what rejects a result is the kind of finding, never where
// its flag stands among the result's integrity_flags, and submitted code that did not pass
// gets its finding back, not its tensors.
#include <gtest/gtest.h>

#include <string>

#include "server/evaluation/evaluation.h"
#include "server/evaluation/measurement_checks.h"

namespace kerneleval::server {
namespace {

v1::Device H200() {
  v1::Device d;
  d.set_l2_cache_bytes(62'914'560);
  d.set_peak_bytes_per_second(4.814e12);
  return d;
}

Problem H2048(std::int64_t batch) {
  Problem p;
  p.dtype = DType::kBF16;
  p.mode = Mode::kOutput;
  p.batch = batch;
  p.hidden = 2048;
  return p;
}

// Throttled while timing (SW thermal slowdown), with DRAM counters that read `dram_read` and
// write what the definition writes.
Measurement Throttled(const DeclaredBytes& d, double dram_read) {
  Measurement m;
  m.timer = v1::TIMER_CUPTI;
  m.clocks.set_samples(4);
  m.clocks.set_throttle_reasons(0x20);
  m.clocks.add_throttle_reason_names("sw_thermal_slowdown");
  m.dram.set_available(true);
  m.dram.set_read_bytes(dram_read);
  m.dram.set_write_bytes(static_cast<double>(d.write));
  m.dram.set_windows(3);
  m.dram.set_cold(true);
  return m;
}

MeasureOptions Cold() {
  MeasureOptions o;
  o.cold = true;
  o.measure_dram_bytes = true;
  return o;
}

Evaluation Passed() {
  Evaluation e;
  e.correctness.set_checked(true);
  e.correctness.set_passed(true);
  return e;
}

TEST(Verdict, AThrottleNoteNeverRejectsAnHonestResult) {
  const Problem p = H2048(16254);
  const DeclaredBytes d = DeclaredReadWrite(p);
  v1::WorkloadResult r;
  v1::Environment env;
  const IntegrityFindings f =
      AnnotateMeasurement(Throttled(d, d.read), p, H200(), Cold(), 44.5e-6, &r, &env);
  ASSERT_EQ(r.integrity_flags_size(), 1) << r.DebugString();
  EXPECT_FALSE(f.rejects());
  EXPECT_EQ(f.notes.size(), 1u);
  const Verdict v = Judge(Passed(), f, /*submitted=*/true);
  EXPECT_EQ(v.status, v1::RESULT_STATUS_PASSED);
  EXPECT_FALSE(v.withhold_outputs);
}

TEST(Verdict, ATooGoodFindingRejectsWithOrWithoutAThrottleNoteBeforeIt) {
  const Problem p = H2048(16254);
  const DeclaredBytes d = DeclaredReadWrite(p);
  for (const bool throttled : {false, true}) {
    Measurement m = Throttled(d, d.read / 2.0);
    if (!throttled) m.clocks.set_throttle_reasons(0x1);  // idle: not a throttle
    v1::WorkloadResult r;
    v1::Environment env;
    const IntegrityFindings f = AnnotateMeasurement(m, p, H200(), Cold(), 44.5e-6, &r, &env);
    EXPECT_EQ(r.integrity_flags_size(), throttled ? 2 : 1) << r.DebugString();
    const Verdict v = Judge(Passed(), f, /*submitted=*/false);
    EXPECT_EQ(v.status, v1::RESULT_STATUS_REJECTED) << "throttled " << throttled;
    // The error names what rejected it; the clock note stays among the flags only.
    EXPECT_NE(v.error.find("DRAM reads"), std::string::npos) << v.error;
    EXPECT_EQ(v.error.find("clocks held back"), std::string::npos) << v.error;
  }
}

TEST(Verdict, AWrongAnswerOnFreshInputsRejectsBeforeAnythingElse) {
  Evaluation e = Passed();
  e.verification_failure = "verification round 1: output[3, 0] wrong";
  IntegrityFindings f;
  f.too_good.push_back("median below the analytic floor");
  const Verdict v = Judge(e, f, /*submitted=*/true);
  EXPECT_EQ(v.status, v1::RESULT_STATUS_REJECTED);
  EXPECT_EQ(v.error, e.verification_failure);
  EXPECT_TRUE(v.withhold_outputs);
}

TEST(Verdict, SubmittedCodeThatDidNotPassGetsNoTensorsBack) {
  Evaluation wrong;
  wrong.correctness.set_checked(true);
  wrong.correctness.set_passed(false);
  EXPECT_EQ(Judge(wrong, {}, /*submitted=*/true).status, v1::RESULT_STATUS_INCORRECT);
  EXPECT_TRUE(Judge(wrong, {}, /*submitted=*/true).withhold_outputs);
  // A built-in's wrong output is the caller's to inspect.
  EXPECT_FALSE(Judge(wrong, {}, /*submitted=*/false).withhold_outputs);

  IntegrityFindings too_good;
  too_good.too_good.push_back("L2 reads 0.01 MB per call, below the 133 MB");
  EXPECT_TRUE(Judge(Passed(), too_good, /*submitted=*/true).withhold_outputs);
  EXPECT_FALSE(Judge(Passed(), {}, /*submitted=*/true).withhold_outputs);
  // Unchecked (a built-in Run that did not ask): no verdict, nothing to withhold.
  EXPECT_EQ(Judge(Evaluation(), {}, /*submitted=*/false).status, v1::RESULT_STATUS_UNSPECIFIED);
}

}  // namespace
}  // namespace kerneleval::server
