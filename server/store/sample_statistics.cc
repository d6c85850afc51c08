#include "server/store/sample_statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace kerneleval::server::store {
namespace {

// P(U <= u) under H0 for sizes n1, n2 without ties: counts of rank arrangements by U,
// built up one element at a time (Mann & Whitney's recurrence).
double ExactCdf(int n1, int n2, double u) {
  // f[i][j][k]: arrangements of i + j elements with U = k.
  const int max_u = n1 * n2;
  std::vector<std::vector<std::vector<double>>> f(
      n1 + 1, std::vector<std::vector<double>>(n2 + 1, std::vector<double>(max_u + 1, 0)));
  for (int i = 0; i <= n1; ++i) {
    for (int j = 0; j <= n2; ++j) {
      if (i == 0 || j == 0) {
        f[i][j][0] = 1;
        continue;
      }
      for (int k = 0; k <= i * j; ++k) {
        // The largest element belongs to x (adds j to U) or to y (adds nothing).
        f[i][j][k] = (k >= j ? f[i - 1][j][k - j] : 0) + f[i][j - 1][k];
      }
    }
  }
  double total = 0, below = 0;
  for (int k = 0; k <= max_u; ++k) {
    total += f[n1][n2][k];
    if (k <= u + 1e-9) below += f[n1][n2][k];
  }
  return below / total;
}

double MedianOfSorted(const std::vector<double>& v) {
  const std::size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// nth_element median: the bootstrap calls this thousands of times.
double MedianInPlace(std::vector<double>* v) {
  const std::size_t n = v->size();
  if (n == 0) return 0;
  auto mid = v->begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v->begin(), mid, v->end());
  if (n % 2 == 1) return *mid;
  return 0.5 * (*mid + *std::max_element(v->begin(), mid));
}

}  // namespace

MannWhitney MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y) {
  MannWhitney r;
  const std::size_t n1 = x.size(), n2 = y.size();
  if (n1 == 0 || n2 == 0) return r;
  std::vector<std::pair<double, int>> all;
  all.reserve(n1 + n2);
  for (double v : x) all.emplace_back(v, 0);
  for (double v : y) all.emplace_back(v, 1);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Average ranks over ties; sum of t^3 - t for the variance correction.
  double rank_sum_x = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (std::size_t k = i; k < j; ++k) {
      if (all[k].second == 0) rank_sum_x += avg_rank;
    }
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j;
  }
  const double a = static_cast<double>(n1), b = static_cast<double>(n2);
  r.u = rank_sum_x - a * (a + 1) / 2;
  const double u_max = std::max(r.u, a * b - r.u);
  if (n1 < 8 && n2 < 8 && !ties) {
    r.exact = true;
    // Two-sided: 2 * P(U >= u_max) = 2 * (1 - P(U <= u_max - 1)).
    r.p_value =
        std::min(1.0, 2 * (1 - ExactCdf(static_cast<int>(n1), static_cast<int>(n2), u_max - 1)));
    return r;
  }
  const double n = a + b;
  const double mu = a * b / 2;
  const double var = a * b / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (var <= 0) return r;  // every value equal: no evidence of a difference
  const double z = (u_max - mu - 0.5) / std::sqrt(var);
  r.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return MedianOfSorted(v);
}

RatioInterval BootstrapRatioOfMedians(const std::vector<double>& baseline,
                                      const std::vector<double>& candidate, double confidence,
                                      int resamples, std::uint64_t seed) {
  RatioInterval r;
  const double base = Median(baseline);
  if (baseline.empty() || candidate.empty() || base <= 0) return r;
  r.ratio = Median(candidate) / base;
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> bs(baseline.size()), cs(candidate.size());
  std::uniform_int_distribution<std::size_t> pick_b(0, baseline.size() - 1);
  std::uniform_int_distribution<std::size_t> pick_c(0, candidate.size() - 1);
  for (int i = 0; i < resamples; ++i) {
    for (double& v : bs) v = baseline[pick_b(rng)];
    for (double& v : cs) v = candidate[pick_c(rng)];
    const double mb = MedianInPlace(&bs);
    if (mb > 0) ratios.push_back(MedianInPlace(&cs) / mb);
  }
  if (ratios.empty()) return r;
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(ratios.size() - 1);
    return ratios[static_cast<std::size_t>(std::lround(pos))];
  };
  r.low = at(tail);
  r.high = at(1 - tail);
  return r;
}

SampleVerdict CompareSamples(const std::vector<double>& baseline,
                             const std::vector<double>& candidate, double alpha,
                             double min_relative_difference) {
  SampleVerdict v;
  if (baseline.size() < 3 || candidate.size() < 3) return v;
  v.test = MannWhitneyU(candidate, baseline);
  // 2000 resamples: the 2.5 % tails rest on 50 values each, enough for two digits.
  v.ratio = BootstrapRatioOfMedians(baseline, candidate, 0.95, 2000, 0x5eed);
  auto relative_iqr = [](const std::vector<double>& side) {
    const double m = Median(side);
    return m > 0 ? InterquartileRange(side) / m : 0.0;
  };
  v.noise = kNoiseMultiplier * std::max(relative_iqr(baseline), relative_iqr(candidate));
  v.threshold = std::max(min_relative_difference, v.noise);
  const double t = v.threshold;
  const double asked = min_relative_difference;
  const bool significant = v.test.p_value < alpha;
  if (significant && v.ratio.low > 1 + t) {
    v.change = Change::kSlower;
  } else if (significant && v.ratio.high < 1 - t) {
    v.change = Change::kFaster;
  } else if (significant && (v.ratio.low > 1 + asked || v.ratio.high < 1 - asked)) {
    v.change = Change::kNoisy;
  } else if (v.ratio.low >= 1 - t && v.ratio.high <= 1 + t) {
    v.change = Change::kSame;
  } else {
    v.change = Change::kInconclusive;
  }
  return v;
}

double InterquartileRange(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const std::vector<double> q = Quantiles(v, 5);  // 0, 25, 50, 75, 100 %
  return q[3] - q[1];
}

std::vector<double> Quantiles(std::vector<double> v, int n_out) {
  std::vector<double> out;
  if (v.empty() || n_out < 1) return out;
  std::sort(v.begin(), v.end());
  for (int i = 0; i < n_out; ++i) {
    const double q = n_out == 1 ? 0.5 : static_cast<double>(i) / (n_out - 1);
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    out.push_back(v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]));
  }
  return out;
}

}  // namespace kerneleval::server::store
