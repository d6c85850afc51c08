// The checks a skeptic makes of a measurement: DRAM traffic against the declared bytes (with
// writes allowed to stay dirty in L2), the analytic floor, throttled clocks, and the label
// that says how each number was measured; and the one verdict Run and Benchmark draw from them.
#include "server/evaluation/measurement_checks.h"

#include <gtest/gtest.h>

#include <string>

#include "server/evaluation/evaluation.h"

namespace kerneleval::server {
namespace {

constexpr std::uint64_t kL2 = 62'914'560;  // H200
constexpr double kPeak = 4.814e12;         // H200 attribute peak, bytes/s

v1::Device H200() {
  v1::Device d;
  d.set_l2_cache_bytes(kL2);
  d.set_peak_bytes_per_second(kPeak);
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

MeasureOptions Cold() {
  MeasureOptions o;
  o.cold = true;
  o.measure_dram_bytes = true;
  return o;
}

Measurement WithDram(double read, double write) {
  Measurement m;
  m.timer = v1::TIMER_CUPTI;
  m.dram.set_available(true);
  m.dram.set_read_bytes(read);
  m.dram.set_write_bytes(write);
  m.dram.set_windows(3);
  m.dram.set_cold(true);
  return m;
}

bool HasFlag(const v1::WorkloadResult& r, const std::string& text) {
  for (const std::string& f : r.integrity_flags()) {
    if (f.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(MeasurementChecks, DeclaredBytesSplitIntoReadsAndWrites) {
  const DeclaredBytes d = DeclaredReadWrite(H2048(16254));
  EXPECT_EQ(d.read, 2ull * 16254 * 2048 * 2 + 2048 * 2);
  EXPECT_EQ(d.write, 1ull * 16254 * 2048 * 2);
  Problem in_place = H2048(3);
  in_place.mode = Mode::kInPlace;
  EXPECT_EQ(DeclaredReadWrite(in_place).write, 2ull * 3 * 2048 * 2);
}

// The fused kernel at B = 16254 on an H200 (Nsight Compute, PERFORMANCE.md): reads exactly
// what it must, 45 MB of its 66.6 MB of writes inside the kernel, 44.5 us.
TEST(MeasurementChecks, AnHonestKernelWithWritesLeftInL2IsNotFlagged) {
  const Problem p = H2048(16254);
  const DeclaredBytes d = DeclaredReadWrite(p);
  v1::WorkloadResult r;
  v1::Environment env;
  EXPECT_FALSE(
      AnnotateMeasurement(WithDram(d.read + 1e5, 45.0e6), p, H200(), Cold(), 44.5e-6, &r, &env)
          .rejects());
  EXPECT_EQ(r.integrity_flags_size(), 0) << r.integrity_flags(0);
  EXPECT_EQ(r.dram().declared_read_bytes(), d.read);
  EXPECT_EQ(r.dram().declared_write_bytes(), d.write);
  EXPECT_NEAR(r.dram().bytes_per_second(), (d.read + 1e5 + 45.0e6) / 44.5e-6, 1e3);
  EXPECT_EQ(r.measured_as(), "cupti, cold");
}

// A measurement whose calls were checked on the device says so on the result: device work
// ran between its calls, so it compares only with numbers measured the same way.
TEST(MeasurementChecks, CheckedCallsAreNamedInMeasuredAs) {
  const Problem p = H2048(16254);
  const DeclaredBytes d = DeclaredReadWrite(p);
  v1::WorkloadResult r;
  v1::Environment env;
  Measurement m = WithDram(d.read + 1e5, 45.0e6);
  m.calls_checked = 60;
  AnnotateMeasurement(m, p, H200(), Cold(), 44.5e-6, &r, &env);
  EXPECT_EQ(r.measured_as(), "cupti, cold, calls checked");
}

TEST(MeasurementChecks, HalfTheRowsIsFlaggedAndSoIsATimeBelowTheFloor) {
  const Problem p = H2048(16254);
  const DeclaredBytes d = DeclaredReadWrite(p);
  v1::WorkloadResult r;
  v1::Environment env;
  EXPECT_TRUE(AnnotateMeasurement(WithDram(d.read / 2.0, 0.0), p, H200(), Cold(), 22e-6, &r, &env)
                  .rejects());
  EXPECT_TRUE(HasFlag(r, "DRAM reads")) << r.DebugString();
  // 66.6 MB declared, 62.9 MB may stay in L2: writing nothing is still short of 3.7 MB.
  EXPECT_TRUE(HasFlag(r, "DRAM writes")) << r.DebugString();
  EXPECT_TRUE(HasFlag(r, "below the analytic floor")) << r.DebugString();
}

// The fused kernel on an H100 at B = 12383, cold (the cheat matrix's examples, 2026-12-05):
// 44.4 us for 152 MB is 3.43 TB/s, above the 3.35 TB/s attribute peak, because its 50.7 MB
// of writes fit the 50 MiB L2 and are written back by the flush after the call. Reads alone
// set the floor there; writing nothing at all is still caught by the DRAM and L2 checks.
TEST(MeasurementChecks, ColdWritesThatFitInL2AreNotPartOfTheFloor) {
  v1::Device h100;
  h100.set_l2_cache_bytes(52'428'800);
  h100.set_peak_bytes_per_second(3.352e12);
  const Problem p = H2048(12383);
  const DeclaredBytes d = DeclaredReadWrite(p);
  v1::WorkloadResult r;
  v1::Environment env;
  EXPECT_FALSE(
      AnnotateMeasurement(WithDram(d.read, 0.5e6), p, h100, Cold(), 44.385e-6, &r, &env).rejects());
  EXPECT_EQ(r.integrity_flags_size(), 0) << r.DebugString();
  // Faster than its reads alone allow: below the floor.
  v1::WorkloadResult fast;
  EXPECT_TRUE(AnnotateMeasurement(WithDram(d.read, 0.5e6), p, h100, Cold(),
                                  0.9 * static_cast<double>(d.read) / 3.352e12, &fast, &env)
                  .rejects());
  EXPECT_TRUE(HasFlag(fast, "below the analytic floor")) << fast.DebugString();
  // Hot, back to back, each call pays for the last one's write-backs: every byte counts.
  MeasureOptions hot;
  hot.cold = false;
  Measurement m;
  m.timer = v1::TIMER_CUPTI;
  v1::WorkloadResult back_to_back;
  EXPECT_TRUE(AnnotateMeasurement(m, p, h100, hot, 44.385e-6, &back_to_back, &env).rejects());
  EXPECT_TRUE(HasFlag(back_to_back, "below the analytic floor")) << back_to_back.DebugString();
}

TEST(MeasurementChecks, SmallBatchesMayLeaveEveryWriteInL2) {
  const Problem p = H2048(79);
  const DeclaredBytes d = DeclaredReadWrite(p);
  v1::WorkloadResult r;
  v1::Environment env;
  EXPECT_FALSE(
      AnnotateMeasurement(WithDram(d.read, 0.0), p, H200(), Cold(), 1.9e-6, &r, &env).rejects());
  EXPECT_EQ(r.integrity_flags_size(), 0) << r.integrity_flags(0);
}

// Cold graph replay: the flush comes before the replay, so of 10 replayed calls only the
// first reads from DRAM. An honest kernel's per-call reads are then a tenth of the declared
// ones, which must not read as a cheat; a single cold call is still held to them.
TEST(MeasurementChecks, ColdGraphReplayIsNotHeldToPerCallDramReads) {
  const Problem p = H2048(79);
  const DeclaredBytes d = DeclaredReadWrite(p);
  MeasureOptions replay = Cold();
  replay.graph = true;
  replay.graph_calls = 10;
  v1::WorkloadResult r;
  v1::Environment env;
  EXPECT_FALSE(
      AnnotateMeasurement(WithDram(d.read / 10.0, 0.0), p, H200(), replay, 1.3e-6, &r, &env)
          .rejects());
  EXPECT_EQ(r.integrity_flags_size(), 0) << r.integrity_flags(0);
  v1::WorkloadResult single;
  EXPECT_TRUE(
      AnnotateMeasurement(WithDram(d.read / 10.0, 0.0), p, H200(), Cold(), 1.3e-6, &single, &env)
          .rejects());
  EXPECT_TRUE(HasFlag(single, "DRAM reads")) << single.DebugString();
}

TEST(MeasurementChecks, HotResultsThatFitInL2AreNotHeldToTheDramFloor) {
  Problem p = H2048(2048);  // 25 MB, fits a 60 MiB L2
  MeasureOptions hot;
  hot.cold = false;
  hot.graph = true;
  hot.graph_calls = 50;
  Measurement m;
  m.timer = v1::TIMER_CUDA_EVENTS;
  v1::WorkloadResult r;
  v1::Environment env;
  AnnotateMeasurement(m, p, H200(), hot, 1e-6, &r, &env);
  EXPECT_EQ(r.integrity_flags_size(), 0);
  EXPECT_EQ(r.measured_as(), "cuda_events, hot, graph x50");
  EXPECT_FALSE(r.has_dram());  // not asked for
}

// The L2 work floor holds in every protocol, hot graph replay included, where DRAM says
// nothing (the inputs stay in L2): a kernel that reads one element per row and keeps the
// answer it found in its output is far below; an honest one is at or above it.
TEST(MeasurementChecks, L2TrafficBelowTheDeclaredBytesIsFlaggedInHotReplayToo) {
  const Problem p = H2048(79);
  const DeclaredBytes d = DeclaredReadWrite(p);
  MeasureOptions hot;
  hot.cold = false;
  hot.graph = true;
  hot.graph_calls = 20;
  hot.measure_dram_bytes = true;
  auto with_l2 = [&](double read, double write) {
    Measurement m = WithDram(0.0, 0.0);  // everything served from L2
    m.dram.set_cold(false);
    m.dram.set_l2_available(true);
    m.dram.set_l2_read_bytes(read);
    m.dram.set_l2_write_bytes(write);
    return m;
  };
  v1::Environment env;
  v1::WorkloadResult honest;
  EXPECT_FALSE(
      AnnotateMeasurement(with_l2(d.read * 1.02, d.write), p, H200(), hot, 1.3e-6, &honest, &env)
          .rejects());
  EXPECT_EQ(honest.integrity_flags_size(), 0) << honest.DebugString();
  EXPECT_TRUE(honest.dram().l2_available());

  v1::WorkloadResult probe;
  EXPECT_TRUE(
      AnnotateMeasurement(with_l2(79 * 32.0 + 4096, d.write), p, H200(), hot, 0.9e-6, &probe, &env)
          .rejects());
  EXPECT_TRUE(HasFlag(probe, "L2 reads 6.62 kB per call, below the")) << probe.DebugString();
  EXPECT_FALSE(HasFlag(probe, "L2 writes"));

  v1::WorkloadResult skips_writes;
  EXPECT_TRUE(
      AnnotateMeasurement(with_l2(d.read, d.write / 2), p, H200(), hot, 0.9e-6, &skips_writes, &env)
          .rejects());
  EXPECT_TRUE(HasFlag(skips_writes, "L2 writes")) << skips_writes.DebugString();

  // Where the chip could not count L2 with DRAM in one pass, no L2 figure and no flag.
  Measurement no_l2 = with_l2(0, 0);
  no_l2.dram.set_l2_available(false);
  v1::WorkloadResult r;
  EXPECT_FALSE(AnnotateMeasurement(no_l2, p, H200(), hot, 1.3e-6, &r, &env).rejects());
  EXPECT_EQ(r.integrity_flags_size(), 0) << r.DebugString();
}

TEST(MeasurementChecks, UnavailableCountersSaySoAndAreNeverZeroes) {
  const Problem p = H2048(16254);
  Measurement m;
  m.timer = v1::TIMER_CUPTI;
  m.dram.set_unavailable_reason("counters unavailable on this machine: LibraryNotLoaded");
  v1::WorkloadResult r;
  v1::Environment env;
  AnnotateMeasurement(m, p, H200(), Cold(), 44e-6, &r, &env);
  EXPECT_FALSE(r.dram().available());
  EXPECT_EQ(r.dram().unavailable_reason(), m.dram.unavailable_reason());
  EXPECT_EQ(r.integrity_flags_size(), 0);

  Measurement cpu;  // a backend with no counters at all
  cpu.timer = v1::TIMER_HOST_CLOCK;
  v1::WorkloadResult c;
  AnnotateMeasurement(cpu, p, v1::Device(), Cold(), 1e-3, &c, &env);
  EXPECT_FALSE(c.dram().available());
  EXPECT_NE(c.dram().unavailable_reason().find("counters unavailable"), std::string::npos);
}

TEST(MeasurementChecks, ThrottledClocksAreFlaggedAndFoldedIntoTheEnvironment) {
  const Problem p = H2048(64);
  Measurement m;
  m.timer = v1::TIMER_CUPTI;
  m.clocks.set_samples(4);
  m.clocks.set_sm_mhz_min(1410);
  m.clocks.set_sm_mhz_max(1980);
  m.clocks.set_sm_mhz_mean(1700);
  m.clocks.set_throttle_reasons(0x1 | 0x20);  // idle (benign) and SW thermal slowdown
  m.clocks.add_throttle_reason_names("sw_thermal_slowdown");
  v1::WorkloadResult r;
  v1::Environment env;
  env.mutable_clocks_during()->set_samples(2);
  env.mutable_clocks_during()->set_sm_mhz_mean(1980);
  env.mutable_clocks_during()->set_sm_mhz_min(1980);
  env.mutable_clocks_during()->set_sm_mhz_max(1980);
  AnnotateMeasurement(m, p, H200(), Cold(), 2e-6, &r, &env);
  EXPECT_TRUE(r.throttled());
  EXPECT_TRUE(HasFlag(r, "clocks held back"));
  EXPECT_EQ(env.clocks_during().samples(), 6u);
  EXPECT_EQ(env.clocks_during().sm_mhz_min(), 1410u);
  EXPECT_NEAR(env.clocks_during().sm_mhz_mean(), (2 * 1980 + 4 * 1700) / 6.0, 1e-9);

  Measurement idle = m;
  idle.clocks.set_throttle_reasons(0x1);
  v1::WorkloadResult calm;
  AnnotateMeasurement(idle, p, H200(), Cold(), 2e-6, &calm, &env);
  EXPECT_FALSE(calm.throttled());
}

// One judge for Run and Benchmark (evaluation.h Judge): what rejects a result is the kind of
// finding, never where its flag stands among the result's integrity_flags, and submitted
// code that did not pass gets its finding back, not its tensors.

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
