#include "server/store/compare_results.h"

#include "absl/strings/str_cat.h"
#include "server/store/comparability.h"
#include "server/store/result_rows.h"
#include "server/store/sol_peaks.h"

namespace kerneleval::server::store {
namespace {

v1::Verdict ToVerdict(Change c) {
  switch (c) {
    case Change::kSame:
      return v1::VERDICT_SAME;
    case Change::kFaster:
      return v1::VERDICT_FASTER;
    case Change::kSlower:
      return v1::VERDICT_SLOWER;
    case Change::kInconclusive:
      return v1::VERDICT_INCONCLUSIVE;
    case Change::kIncomparable:
      return v1::VERDICT_INCOMPARABLE;
    case Change::kNoisy:
      return v1::VERDICT_NOISY;
  }
  return v1::VERDICT_INCOMPARABLE;
}

// What differs within one side's pool ("the baseline pools ...") or between the two sides;
// empty when every result measured the same setup.
// Results that measured nothing (SKIPPED: cut before or during their samples) pool no
// samples and carry no timer, so they say nothing about a side's setup.
std::vector<v1::StoredResult> Measured(const std::vector<v1::StoredResult>& pool) {
  std::vector<v1::StoredResult> measured;
  for (const v1::StoredResult& s : pool) {
    if (s.result().status() != v1::RESULT_STATUS_SKIPPED) measured.push_back(s);
  }
  return measured.empty() ? pool : measured;
}

std::string WhyIncomparable(const std::vector<v1::StoredResult>& all_baseline,
                            const std::vector<v1::StoredResult>& all_candidate) {
  const std::vector<v1::StoredResult> baseline = Measured(all_baseline);
  const std::vector<v1::StoredResult> candidate = Measured(all_candidate);
  for (const auto& [side, pool] :
       {std::pair<const char*, const std::vector<v1::StoredResult>*>{"baseline", &baseline},
        {"candidate", &candidate}}) {
    const MeasuredSetup first = SetupOf(pool->front());
    for (const v1::StoredResult& s : *pool) {
      const std::string d = SetupDifferences(first, SetupOf(s));
      if (!d.empty()) return absl::StrCat("the ", side, " pools results that differ: ", d);
    }
  }
  return SetupDifferences(SetupOf(baseline.front()), SetupOf(candidate.front()));
}

}  // namespace

v1::SampleComparison CompareStored(const std::vector<v1::StoredResult>& baseline,
                                   const std::vector<v1::StoredResult>& candidate, double alpha,
                                   double min_relative) {
  v1::SampleComparison c;
  c.set_verdict(v1::VERDICT_INCOMPARABLE);
  c.set_threshold(min_relative);
  if (baseline.empty() || candidate.empty()) {
    c.set_incomparable_reason(baseline.empty() ? "no baseline result" : "no candidate result");
    return c;
  }
  std::vector<double> b, k;
  bool baseline_passed = false, candidate_passed = false;
  for (const auto& s : baseline) {
    if (s.result().status() != v1::RESULT_STATUS_PASSED) continue;
    baseline_passed = true;
    for (double v : ComparableSamples(s)) b.push_back(v);
  }
  for (const auto& s : candidate) {
    if (s.result().status() != v1::RESULT_STATUS_PASSED) continue;
    candidate_passed = true;
    for (double v : ComparableSamples(s)) k.push_back(v);
  }
  const v1::WorkloadResult& first = candidate.front().result();
  c.set_workload(first.workload());
  c.set_implementation(first.implementation());
  c.set_baseline_status(baseline.back().result().status());
  c.set_candidate_status(candidate.back().result().status());
  c.set_correctness_changed(c.baseline_status() != c.candidate_status() &&
                            (c.baseline_status() == v1::RESULT_STATUS_PASSED ||
                             c.candidate_status() == v1::RESULT_STATUS_PASSED));
  // The verdict is on times; SOL % of the two sides is only one scale with one peak.
  c.set_peak_difference(PeakDifference(baseline, candidate));
  c.set_baseline_samples(static_cast<std::uint32_t>(b.size()));
  c.set_candidate_samples(static_cast<std::uint32_t>(k.size()));
  if (const std::string why = WhyIncomparable(baseline, candidate); !why.empty()) {
    c.set_incomparable_reason(why);
    return c;
  }
  if (!baseline_passed || !candidate_passed) {
    c.set_incomparable_reason(!baseline_passed ? "the baseline has no passing result"
                                               : "the candidate has no passing result");
    return c;
  }
  c.set_baseline_median_seconds(Median(b));
  c.set_candidate_median_seconds(Median(k));
  c.set_baseline_iqr_seconds(InterquartileRange(b));
  c.set_candidate_iqr_seconds(InterquartileRange(k));
  const SampleVerdict v = CompareSamples(b, k, alpha, min_relative);
  c.set_ratio(v.ratio.ratio);
  c.set_ratio_ci_low(v.ratio.low);
  c.set_ratio_ci_high(v.ratio.high);
  c.set_mann_whitney_u(v.test.u);
  c.set_p_value(v.test.p_value);
  c.set_verdict(ToVerdict(v.change));
  c.set_noise(v.noise);
  if (v.threshold > 0) c.set_threshold(v.threshold);
  if (v.change == Change::kIncomparable) {
    c.set_incomparable_reason("fewer than 3 samples on a side");
  }
  return c;
}

v1::SampleComparison CompareResults(const v1::StoredResult& stored, const v1::WorkloadResult& fresh,
                                    const v1::Environment& environment, double alpha) {
  // The re-run ran the stored receipt (definition, protocol) as sent.
  v1::StoredResult candidate;
  *candidate.mutable_result() = fresh;
  *candidate.mutable_receipt() = stored.receipt();
  *candidate.mutable_environment() = environment;
  return CompareStored({stored}, {candidate}, alpha, 0.01);
}

void Tally(const v1::SampleComparison& c, v1::CompareResponse* r) {
  switch (c.verdict()) {
    case v1::VERDICT_FASTER:
      r->set_faster(r->faster() + 1);
      break;
    case v1::VERDICT_SLOWER:
      r->set_slower(r->slower() + 1);
      break;
    case v1::VERDICT_SAME:
      r->set_same(r->same() + 1);
      break;
    case v1::VERDICT_INCONCLUSIVE:
      r->set_inconclusive(r->inconclusive() + 1);
      break;
    case v1::VERDICT_NOISY:
      r->set_noisy(r->noisy() + 1);
      break;
    default:
      r->set_incomparable(r->incomparable() + 1);
      break;
  }
}

Change ChangeOf(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_SAME:
      return Change::kSame;
    case v1::VERDICT_FASTER:
      return Change::kFaster;
    case v1::VERDICT_SLOWER:
      return Change::kSlower;
    case v1::VERDICT_INCONCLUSIVE:
      return Change::kInconclusive;
    case v1::VERDICT_NOISY:
      return Change::kNoisy;
    default:
      return Change::kIncomparable;
  }
}

const char* ChangeName(Change c) {
  switch (c) {
    case Change::kSame:
      return "same";
    case Change::kFaster:
      return "faster";
    case Change::kSlower:
      return "slower";
    case Change::kInconclusive:
      return "inconclusive";
    case Change::kIncomparable:
      return "incomparable";
    case Change::kNoisy:
      return "noisy";
  }
  return "incomparable";
}

}  // namespace kerneleval::server::store
