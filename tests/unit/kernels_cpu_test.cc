// The CPU implementation against the fp64 reference on awkward shapes, every dtype and mode,
// on every SIMD target this CPU supports, on the calling thread and spread over a pool.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kerneleval/kernels/cpu_simd.h"
#include "kerneleval/kernels/cpu_thread_pool.h"
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

using Bytes = std::vector<std::uint8_t>;

Bytes RandomBytes(DType dtype, std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  Bytes bytes(n * ElementSize(dtype));
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
                 const std::string& what) {
  const double tol = Tolerance(dtype);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double got = LoadAsFloat(dtype, actual, i);
    ASSERT_TRUE(std::isfinite(got)) << what << "[" << i << "] is not finite (unwritten?)";
    ASSERT_LE(std::abs(got - expected[i]), tol + tol * std::abs(expected[i]))
        << what << "[" << i << "]: got " << got << ", reference " << expected[i];
  }
}

bool AllPoison(const Bytes& b) {
  return std::all_of(b.begin(), b.end(), [](std::uint8_t v) { return v == 0xff; });
}

// Every SIMD target compiled in and supported here, made current one after the other.
class EachSimdTarget {
 public:
  EachSimdTarget() : targets_(hwy::SupportedAndGeneratedTargets()) {}
  ~EachSimdTarget() { hwy::SetSupportedTargetsForTest(0); }
  const std::vector<std::int64_t>& targets() const { return targets_; }
  static void Use(std::int64_t target) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_STREQ(CpuSimdTarget(), hwy::TargetName(target));
  }

 private:
  std::vector<std::int64_t> targets_;
};

// One call's inputs (each element stored `misalign` elements into its buffer, so that
// vector loads and stores are unaligned) and its poisoned outputs.
struct Call {
  Call(const Case& c, std::uint64_t seed, std::size_t misalign) : c(c), skip(misalign) {
    std::mt19937_64 rng(seed);
    n = static_cast<std::size_t>(c.batch * c.hidden);
    esize = ElementSize(c.dtype);
    // The same values at any misalignment: the leading elements are poison.
    auto shifted = [&](Bytes b) {
      b.insert(b.begin(), skip * esize, 0xff);
      return b;
    };
    x = shifted(RandomBytes(c.dtype, n, rng));
    r = shifted(RandomBytes(c.dtype, n, rng));
    w = shifted(RandomBytes(c.dtype, static_cast<std::size_t>(c.hidden), rng));
    x_before = x;
    r_before = r;
    out.assign((n + skip) * esize, 0xff);
    res.assign((n + skip) * esize, 0xff);
  }
  void* At(Bytes& b) const { return b.data() + skip * esize; }
  FusedAddRmsNormArgs Args() {
    FusedAddRmsNormArgs a;
    a.dtype = c.dtype;
    a.mode = c.mode;
    a.batch = c.batch;
    a.hidden = c.hidden;
    a.eps = 1e-6f;
    a.hidden_states = At(x);
    a.residual = At(r);
    a.weight = At(w);
    a.output = c.mode == Mode::kInPlace ? At(x) : At(out);
    a.residual_out = c.mode == Mode::kInPlace ? At(r) : WritesResidual(c.mode) ? At(res) : nullptr;
    return a;
  }
  // What the call wrote: for in-place modes, the input buffers.
  const Bytes& Output() const { return c.mode == Mode::kInPlace ? x : out; }
  const Bytes& ResidualOut() const { return c.mode == Mode::kInPlace ? r : res; }

  Case c;
  std::size_t skip, n, esize;
  Bytes x, r, w, x_before, r_before, out, res;
};

class CpuVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(CpuVsReference, MatchesFp64ReferenceOnEveryTargetAndThreadCount) {
  const Case c = GetParam();
  const std::uint64_t seed =
      c.batch * 1000003 + c.hidden * 31 + static_cast<int>(c.dtype) * 7 + static_cast<int>(c.mode);
  std::vector<double> ref_out(static_cast<std::size_t>(c.batch * c.hidden));
  std::vector<double> ref_res(ref_out.size());
  {
    Call ref(c, seed, 0);
    FusedAddRmsNormReference(c.dtype, c.batch, c.hidden, 1e-6, ref.At(ref.x), ref.At(ref.r),
                             ref.At(ref.w), ref_out.data(), ref_res.data());
  }
  CpuThreadPool pool(3);
  EachSimdTarget each;
  for (std::int64_t target : each.targets()) {
    ASSERT_NO_FATAL_FAILURE(EachSimdTarget::Use(target));
    Bytes single_out;
    for (CpuThreadPool* threads : {static_cast<CpuThreadPool*>(nullptr), &pool}) {
      for (std::size_t misalign : {0, 1}) {
        const std::string where = std::string(hwy::TargetName(target)) +
                                  (threads ? " pool" : " caller") + (misalign ? " unaligned" : "");
        Call call(c, seed, misalign);
        FusedAddRmsNormCpu(call.Args(), threads);
        const std::size_t skip_bytes = misalign * call.esize;
        ASSERT_NO_FATAL_FAILURE(
            ExpectClose(c.dtype, call.Output().data() + skip_bytes, ref_out, where + " output"));
        if (WritesResidual(c.mode)) {
          ASSERT_NO_FATAL_FAILURE(ExpectClose(c.dtype, call.ResidualOut().data() + skip_bytes,
                                              ref_res, where + " residual_out"));
        }
        if (c.mode != Mode::kInPlace) {
          EXPECT_EQ(call.x, call.x_before) << where << ": hidden_states was modified";
          EXPECT_EQ(call.r, call.r_before) << where << ": residual was modified";
        }
        if (c.mode == Mode::kOutput) EXPECT_TRUE(AllPoison(call.res)) << where;
        // Nothing written before the tensor starts.
        EXPECT_TRUE(std::all_of(
            call.Output().begin(), call.Output().begin() + skip_bytes,
            [&](std::uint8_t b) { return c.mode == Mode::kInPlace ? true : b == 0xff; }))
            << where;
        // Rows do not depend on the thread that ran them: bit for bit the same answer.
        Bytes got(call.Output().begin() + skip_bytes, call.Output().end());
        if (single_out.empty()) {
          single_out = got;
        } else {
          EXPECT_EQ(got, single_out) << where << ": differs from the single-threaded call";
        }
      }
    }
  }
}

TEST_P(CpuVsReference, UnfusedBaselineWithinToleranceOnEveryThreadCount) {
  const Case c = GetParam();
  const std::uint64_t seed = c.batch * 17 + c.hidden;
  std::vector<double> ref_out(static_cast<std::size_t>(c.batch * c.hidden));
  std::vector<double> ref_res(ref_out.size());
  {
    Call ref(c, seed, 0);
    FusedAddRmsNormReference(c.dtype, c.batch, c.hidden, 1e-6, ref.At(ref.x), ref.At(ref.r),
                             ref.At(ref.w), ref_out.data(), ref_res.data());
  }
  CpuThreadPool pool(2);
  for (CpuThreadPool* threads : {static_cast<CpuThreadPool*>(nullptr), &pool}) {
    Call call(c, seed, 0);
    Bytes scratch(call.n * call.esize);
    UnfusedAddRmsNormCpu(call.Args(), scratch.data(), threads);
    ExpectClose(c.dtype, call.Output().data(), ref_out, "output");
    if (WritesResidual(c.mode)) ExpectClose(c.dtype, call.ResidualOut().data(), ref_res, "res");
    if (c.mode != Mode::kInPlace) EXPECT_EQ(call.x, call.x_before);
  }
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

TEST(CpuKernel, RowDoesNotDependOnBatchOrSplit) {
  // Row 200 of a pooled batch of 257 equals the same row computed alone.
  CpuThreadPool pool(2);
  const Case c{DType::kBF16, Mode::kOutputAndResidual, 257, 2048};
  Call batch(c, 5, 0);
  FusedAddRmsNormCpu(batch.Args(), &pool);
  FusedAddRmsNormArgs one = batch.Args();
  const std::size_t row_bytes = 2048 * 2, offset = 200 * row_bytes;
  Bytes out(row_bytes), res(row_bytes);
  one.batch = 1;
  one.hidden_states = batch.x.data() + offset;
  one.residual = batch.r.data() + offset;
  one.output = out.data();
  one.residual_out = res.data();
  FusedAddRmsNormCpu(one);
  EXPECT_EQ(0, std::memcmp(out.data(), batch.out.data() + offset, row_bytes));
  EXPECT_EQ(0, std::memcmp(res.data(), batch.res.data() + offset, row_bytes));
}

TEST(CpuKernel, LargeCallsThatStreamTheirStoresMatchSmallCalls) {
  // Over 16 MiB per tensor the stores bypass the caches, starting at the first aligned
  // element of each row (hidden 4001: every row starts at a different alignment). The same
  // rows computed 64 at a time (below the threshold) must give the same bits.
  CpuThreadPool pool(2);
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    for (std::size_t misalign : {0, 1}) {
      const std::int64_t batch = dtype == DType::kFP32 ? 1100 : 2100;
      // Drawing 17 M normal values is most of this test's time: drawn once, copied per mode.
      const Call fresh(Case{dtype, Mode::kOutput, batch, 4001}, 11, misalign);
      for (Mode mode : {Mode::kOutput, Mode::kOutputAndResidual, Mode::kInPlace}) {
        Call whole = fresh, pieces = fresh;
        whole.c.mode = pieces.c.mode = mode;
        ASSERT_GE(whole.n * whole.esize, std::size_t{16} << 20);
        FusedAddRmsNormCpu(whole.Args(), &pool);
        const FusedAddRmsNormArgs all = pieces.Args();
        const std::size_t row_bytes = 4001 * pieces.esize;
        for (std::int64_t begin = 0; begin < batch; begin += 64) {
          FusedAddRmsNormArgs part = all;
          const std::size_t offset = static_cast<std::size_t>(begin) * row_bytes;
          part.batch = std::min<std::int64_t>(64, batch - begin);
          part.hidden_states = static_cast<const std::uint8_t*>(all.hidden_states) + offset;
          part.residual = static_cast<const std::uint8_t*>(all.residual) + offset;
          part.output = static_cast<std::uint8_t*>(all.output) + offset;
          if (all.residual_out != nullptr) {
            part.residual_out = static_cast<std::uint8_t*>(all.residual_out) + offset;
          }
          FusedAddRmsNormCpu(part);
        }
        const std::string where =
            std::string(DTypeName(dtype)) + " " + ModeName(mode) + (misalign ? " unaligned" : "");
        EXPECT_TRUE(whole.Output() == pieces.Output()) << where;
        if (WritesResidual(mode)) EXPECT_TRUE(whole.ResidualOut() == pieces.ResidualOut()) << where;
        if (mode == Mode::kOutput) EXPECT_TRUE(AllPoison(whole.res)) << where;
        if (mode != Mode::kInPlace) EXPECT_TRUE(whole.x == whole.x_before) << where;
      }
    }
  }
}

TEST(CpuKernel, NonFiniteInputsPropagate) {
  // NaN and Inf reach the output as NaN / Inf, as in the reference, in every dtype.
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    const Case c{dtype, Mode::kOutputAndResidual, 2, 64};
    Call call(c, 9, 0);
    StoreFromFloat(dtype, call.x.data(), 3, NAN);
    StoreFromFloat(dtype, call.x.data(), 64 + 5, INFINITY);
    FusedAddRmsNormCpu(call.Args());
    EXPECT_TRUE(std::isnan(LoadAsFloat(dtype, call.out.data(), 0))) << DTypeName(dtype);
    EXPECT_TRUE(std::isnan(LoadAsFloat(dtype, call.res.data(), 3))) << DTypeName(dtype);
    EXPECT_TRUE(std::isinf(LoadAsFloat(dtype, call.res.data(), 64 + 5))) << DTypeName(dtype);
  }
}

// Every fp32 value next to a rounding decision of the 16-bit dtype: the midpoints between
// neighbouring 16-bit values and one fp32 ulp either side, both signs, plus specials.
std::vector<float> RoundingBoundaries(DType dtype) {
  std::vector<float> values = {0.f,   -0.f,           INFINITY,       -INFINITY,     NAN,   -NAN,
                               1e-8f, 65504.f,        65519.99f,      65520.f,       1e30f, 1e-40f,
                               3e38f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f};
  // Positive finite values up to the largest (the next one up is Inf).
  const std::uint32_t inf = dtype == DType::kBF16 ? 0x7f80u : 0x7c00u;
  for (std::uint32_t h = 0; h < inf; ++h) {
    const float lo = dtype == DType::kBF16 ? Bf16ToFloat(static_cast<std::uint16_t>(h))
                                           : Fp16ToFloat(static_cast<std::uint16_t>(h));
    const float hi = dtype == DType::kBF16 ? Bf16ToFloat(static_cast<std::uint16_t>(h + 1))
                                           : Fp16ToFloat(static_cast<std::uint16_t>(h + 1));
    if (!std::isfinite(hi)) continue;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    for (float v : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  return values;
}

TEST(CpuConversions, NarrowLikeTheScalarConversionsOnEveryTarget) {
  EachSimdTarget each;
  for (std::int64_t target : each.targets()) {
    ASSERT_NO_FATAL_FAILURE(EachSimdTarget::Use(target));
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      const std::vector<float> values = RoundingBoundaries(dtype);
      std::vector<std::uint16_t> got(values.size(), 0xdead);
      CpuFromFloat(dtype, values.data(), got.data(), values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t want =
            dtype == DType::kBF16 ? FloatToBf16(values[i]) : FloatToFp16(values[i]);
        const bool nan = std::isnan(values[i]);
        // NaN payloads may differ (hardware keeps them); a NaN must stay a NaN.
        if (nan) {
          EXPECT_TRUE(std::isnan(LoadAsFloat(dtype, got.data(), i)))
              << hwy::TargetName(target) << " " << DTypeName(dtype);
          continue;
        }
        ASSERT_EQ(got[i], want) << hwy::TargetName(target) << " " << DTypeName(dtype) << " "
                                << values[i];
      }
    }
  }
}

TEST(CpuConversions, WidenEvery16BitValueLikeTheScalarConversionsOnEveryTarget) {
  std::vector<std::uint16_t> all(1 << 16);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  EachSimdTarget each;
  for (std::int64_t target : each.targets()) {
    ASSERT_NO_FATAL_FAILURE(EachSimdTarget::Use(target));
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      std::vector<float> got(all.size());
      CpuToFloat(dtype, all.data(), got.data(), all.size());
      for (std::size_t i = 0; i < all.size(); ++i) {
        const float want = LoadAsFloat(dtype, all.data(), i);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got[i])) << hwy::TargetName(target) << " " << i;
        } else {
          ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(float)), 0)
              << hwy::TargetName(target) << " " << DTypeName(dtype) << " " << i << ": " << got[i]
              << " vs " << want;
        }
      }
    }
  }
}

TEST(CpuThreadPool, RunsEveryTaskOnceOnEveryCall) {
  CpuThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (std::size_t tasks : {0, 1, 2, 3, 7, 1000}) {
    for (int call = 0; call < 20; ++call) {
      std::vector<std::atomic<int>> runs(tasks);
      pool.ParallelFor(tasks, [&](std::size_t i) { runs[i].fetch_add(1); });
      for (std::size_t i = 0; i < tasks; ++i) ASSERT_EQ(runs[i].load(), 1) << tasks << " " << i;
    }
  }
}

TEST(CpuThreadPool, SpreadsTasksOverThreads) {
  CpuThreadPool pool(2);
  std::mutex mu;
  std::vector<std::thread::id> ids;
  // Each task waits until both threads hold one, so a single thread cannot run them all.
  std::atomic<int> arrived{0};
  pool.ParallelFor(2, [&](std::size_t) {
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
}

TEST(CpuThreadPool, OneThreadRunsOnTheCaller) {
  CpuThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  std::vector<std::thread::id> ids;
  pool.ParallelFor(3, [&](std::size_t) { ids.push_back(std::this_thread::get_id()); });
  EXPECT_EQ(ids, std::vector<std::thread::id>(3, std::this_thread::get_id()));
  EXPECT_GE(CpuThreadPool::AvailableThreads(), 1);
}

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
