// The CUDA kernels against the fp64 reference: every dtype and mode on awkward shapes, aligned
// and misaligned pointers, looping grids, in-place chains inside a CUDA graph,
// and the unfused baseline. Without a CUDA device every test skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "fused_add_rmsnorm_tuning.h"
#include "kerneleval/kernels/cuda_owners.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval {
namespace {

#define KE_CUDA_CHECK(call)                                                                    \
  do {                                                                                         \
    const cudaError_t ke_err = (call);                                                         \
    ASSERT_EQ(ke_err, cudaSuccess)                                                             \
        << #call << " at " << __FILE__ << ":" << __LINE__ << ": " << cudaGetErrorName(ke_err); \
  } while (0)

// Empty when a device is usable, otherwise why not.
std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err);
  if (count == 0) return "cudaGetDeviceCount reports 0 devices";
  return "";
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string reason = NoDeviceReason();
    if (!reason.empty()) GTEST_SKIP() << "no CUDA device, GPU tests skipped (" << reason << ")";
  }
};

// Device memory seen from a byte offset into its (256-byte aligned) allocation, so that
// data() can be deliberately misaligned.
class OffsetDeviceBuffer {
 public:
  // A failed allocation leaves it empty, which ok() reports.
  OffsetDeviceBuffer(std::size_t bytes, std::size_t offset) : offset_(offset) {
    CudaDeviceMemory::Allocate(bytes + offset + 16, &memory_);
  }
  bool ok() const { return memory_.get() != nullptr; }
  void* data() const { return static_cast<char*>(memory_.get()) + offset_; }

 private:
  CudaDeviceMemory memory_;
  std::size_t offset_ = 0;
};

// Cheap, seeded, roughly standard normal values (sum of four uniforms, variance 1): the
// largest cases draw tens of millions of them.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  float Normal() {
    const std::uint64_t a = Next();
    const std::uint64_t b = Next();
    const float u =
        static_cast<float>((a >> 40) + ((a >> 8) & 0xffffff) + (b >> 40) + ((b >> 8) & 0xffffff)) *
        (1.f / 16777216.f);
    return (u - 2.f) * 1.7320508f;
  }

 private:
  std::uint64_t Next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t state_;
};

std::vector<std::uint8_t> RandomTensor(DType dtype, std::size_t n, Random& rng) {
  std::vector<std::uint8_t> bytes(n * ElementSize(dtype));
  for (std::size_t i = 0; i < n; ++i) StoreFromFloat(dtype, bytes.data(), i, rng.Normal());
  return bytes;
}

// |out - ref| <= atol + rtol * |ref| with atol = rtol: one rounding to the dtype plus fp32
// accumulation error.
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

// Checks every element and reports the count, the first offender and the largest error, so
// that a failure on a 33-million-element tensor stays readable.
void ExpectClose(DType dtype, const std::vector<std::uint8_t>& actual,
                 const std::vector<double>& expected, double tol, const char* what) {
  std::size_t bad = 0;
  std::size_t first_bad = 0;
  double max_err = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double got = LoadAsFloat(dtype, actual.data(), i);
    const double err = std::abs(got - expected[i]);
    const bool ok = std::isfinite(got) && err <= tol + tol * std::abs(expected[i]);
    if (!ok && bad++ == 0) first_bad = i;
    if (std::isfinite(err)) max_err = std::max(max_err, err);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << expected.size()
                     << " elements out of tolerance (NaN = unwritten); first at " << first_bad
                     << ": got " << LoadAsFloat(dtype, actual.data(), first_bad) << ", reference "
                     << expected[first_bad] << "; max |error| " << max_err;
}

enum class Impl { kFused, kUnfused };

struct Case {
  Impl impl = Impl::kFused;
  DType dtype = DType::kBF16;
  Mode mode = Mode::kOutput;
  std::int64_t batch = 1;
  std::int64_t hidden = 1;
  bool misaligned = false;  // every pointer offset by one element from 16-byte alignment
  FusedAddRmsNormTuning tuning;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = std::string(DTypeName(c.dtype)) + "_" + ModeName(c.mode) + "_b" +
                     std::to_string(c.batch) + "_h" + std::to_string(c.hidden);
  if (c.misaligned) name += "_misaligned";
  if (c.tuning.max_ctas > 0) name += "_ctas" + std::to_string(c.tuning.max_ctas);
  if (c.tuning.vecs_per_thread > 0) name += "_vec" + std::to_string(c.tuning.vecs_per_thread);
  if (c.tuning.ctas_per_row > 0) name += "_split" + std::to_string(c.tuning.ctas_per_row);
  if (c.tuning.ctas_per_row < 0) name += "_nosplit";
  return name;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.impl == Impl::kFused ? "fused " : "unfused ") << DTypeName(c.dtype) << " "
      << ModeName(c.mode) << " batch " << c.batch << " hidden " << c.hidden
      << (c.misaligned ? " misaligned" : "") << " max_ctas " << c.tuning.max_ctas << " vecs/thread "
      << c.tuning.vecs_per_thread << " ctas/row " << c.tuning.ctas_per_row;
}

void RunCase(const Case& c) {
  Random rng(0x5eed ^ (static_cast<std::uint64_t>(c.batch) << 32) ^
             (static_cast<std::uint64_t>(c.hidden) << 8) ^
             (static_cast<std::uint64_t>(c.dtype) << 4) ^ static_cast<std::uint64_t>(c.mode) ^
             (c.misaligned ? 0x80 : 0));
  const std::size_t n = static_cast<std::size_t>(c.batch) * static_cast<std::size_t>(c.hidden);
  const std::size_t esize = ElementSize(c.dtype);
  const std::size_t bytes = n * esize;
  const auto x = RandomTensor(c.dtype, n, rng);
  const auto r = RandomTensor(c.dtype, n, rng);
  const auto w = RandomTensor(c.dtype, static_cast<std::size_t>(c.hidden), rng);
  std::vector<double> ref_out(n);
  std::vector<double> ref_res(n);
  FusedAddRmsNormReference(c.dtype, c.batch, c.hidden, 1e-6, x.data(), r.data(), w.data(),
                           ref_out.data(), ref_res.data());

  const std::size_t offset = c.misaligned ? esize : 0;
  OffsetDeviceBuffer d_x(bytes, offset), d_r(bytes, offset), d_w(w.size(), offset);
  OffsetDeviceBuffer d_out(bytes, offset), d_res(bytes, offset), d_scratch(bytes, offset);
  ASSERT_TRUE(d_x.ok() && d_r.ok() && d_w.ok() && d_out.ok() && d_res.ok() && d_scratch.ok());
  KE_CUDA_CHECK(cudaMemcpy(d_x.data(), x.data(), bytes, cudaMemcpyHostToDevice));
  KE_CUDA_CHECK(cudaMemcpy(d_r.data(), r.data(), bytes, cudaMemcpyHostToDevice));
  KE_CUDA_CHECK(cudaMemcpy(d_w.data(), w.data(), w.size(), cudaMemcpyHostToDevice));
  // 0xff bytes are NaN in every dtype: an element the kernel does not write fails.
  KE_CUDA_CHECK(cudaMemset(d_out.data(), 0xff, bytes));
  KE_CUDA_CHECK(cudaMemset(d_res.data(), 0xff, bytes));
  KE_CUDA_CHECK(cudaMemset(d_scratch.data(), 0xff, bytes));

  FusedAddRmsNormArgs args;
  args.dtype = c.dtype;
  args.mode = c.mode;
  args.batch = c.batch;
  args.hidden = c.hidden;
  args.eps = 1e-6f;
  args.hidden_states = d_x.data();
  args.residual = d_r.data();
  args.weight = d_w.data();
  args.output = d_out.data();
  args.residual_out = WritesResidual(c.mode) ? d_res.data() : nullptr;
  if (c.mode == Mode::kInPlace) {
    args.output = d_x.data();
    args.residual_out = d_r.data();
  }
  CudaStream stream;
  KE_CUDA_CHECK(CreateCudaStream(&stream));
  if (c.impl == Impl::kFused) {
    KE_CUDA_CHECK(LaunchFusedAddRmsNormTuned(args, c.tuning, stream.get()));
  } else {
    KE_CUDA_CHECK(LaunchUnfusedAddRmsNorm(args, d_scratch.data(), stream.get()));
  }
  KE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));

  std::vector<std::uint8_t> out(bytes);
  KE_CUDA_CHECK(cudaMemcpy(out.data(), args.output, bytes, cudaMemcpyDeviceToHost));
  ExpectClose(c.dtype, out, ref_out, Tolerance(c.dtype), "output");
  if (WritesResidual(c.mode)) {
    std::vector<std::uint8_t> res(bytes);
    KE_CUDA_CHECK(cudaMemcpy(res.data(), args.residual_out, bytes, cudaMemcpyDeviceToHost));
    ExpectClose(c.dtype, res, ref_res, Tolerance(c.dtype), "residual_out");
  }
  if (c.mode != Mode::kInPlace) {
    std::vector<std::uint8_t> after(bytes);
    KE_CUDA_CHECK(cudaMemcpy(after.data(), d_x.data(), bytes, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(after == x) << "hidden_states was modified";
    KE_CUDA_CHECK(cudaMemcpy(after.data(), d_r.data(), bytes, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(after == r) << "residual was modified";
  }
  if (c.mode == Mode::kOutput && c.impl == Impl::kFused) {
    std::vector<std::uint8_t> res(bytes);
    KE_CUDA_CHECK(cudaMemcpy(res.data(), d_res.data(), bytes, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(std::all_of(res.begin(), res.end(), [](std::uint8_t b) { return b == 0xff; }))
        << "kOutput wrote a residual";
  }
}

class FusedKernel : public GpuTest, public ::testing::WithParamInterface<Case> {};
TEST_P(FusedKernel, MatchesFp64Reference) { RunCase(GetParam()); }

class UnfusedKernel : public GpuTest, public ::testing::WithParamInterface<Case> {};
TEST_P(UnfusedKernel, WithinToleranceOfFp64Reference) { RunCase(GetParam()); }

constexpr DType kDTypes[] = {DType::kBF16, DType::kFP16, DType::kFP32};
constexpr Mode kModes[] = {Mode::kOutput, Mode::kOutputAndResidual, Mode::kInPlace};
constexpr std::int64_t kHiddens[] = {1, 7, 111, 2048, 5000, 32768};

std::vector<Case> FusedCases() {
  std::vector<Case> cases;
  for (DType dtype : kDTypes) {
    for (Mode mode : kModes) {
      for (std::int64_t hidden : kHiddens) {
        for (std::int64_t batch : {1, 3, 257}) {
          for (bool misaligned : {false, true}) {
            if (misaligned && batch == 1) continue;
            Case c;
            c.dtype = dtype;
            c.mode = mode;
            c.batch = batch;
            c.hidden = hidden;
            c.misaligned = misaligned;
            cases.push_back(c);
          }
        }
        // Few CTAs, so that every CTA of RowKernel and TwoPassKernel loops over many rows
        // (the double-buffered partials); split rows ignore max_ctas, so they are off here.
        Case looping;
        looping.dtype = dtype;
        looping.mode = mode;
        looping.batch = 257;
        looping.hidden = hidden;
        looping.tuning.max_ctas = 3;
        looping.tuning.ctas_per_row = -1;
        cases.push_back(looping);
        looping.misaligned = true;
        cases.push_back(looping);
      }
    }
  }
  // RowKernel at every vector count it compiles, on rows the launcher now splits, with
  // partial row groups (257 rows) and, at 4 vectors, looping CTAs.
  for (DType dtype : kDTypes) {
    for (Mode mode : kModes) {
      for (std::int64_t hidden : {111, 2048, 5000}) {
        for (int vecs : {1, 2, 4}) {
          Case c;
          c.dtype = dtype;
          c.mode = mode;
          c.batch = 257;
          c.hidden = hidden;
          c.tuning.ctas_per_row = -1;
          c.tuning.vecs_per_thread = vecs;
          c.tuning.max_ctas = vecs == 4 ? 5 : 0;
          cases.push_back(c);
        }
      }
    }
  }
  // Rows split over a cluster of CTAs, every layout the kernel compiles: 1-8 CTAs (3: a
  // cluster that does not divide the row), 1, 2 or 4 vectors per thread, rows whose last
  // CTA is partly empty (8200 fp32 is 2050 vectors), and the long rows of the Liger sweep on
  // the launcher's own table and without it.
  for (DType dtype : kDTypes) {
    for (Mode mode : {Mode::kOutputAndResidual, Mode::kInPlace}) {
      for (std::int64_t hidden : {5000, 8200}) {
        for (int ctas : {1, 2, 3, 8}) {
          for (int vecs : {1, 2, 4}) {
            Case c;
            c.dtype = dtype;
            c.mode = mode;
            c.batch = 5;
            c.hidden = hidden;
            c.tuning.ctas_per_row = ctas;
            c.tuning.vecs_per_thread = vecs;
            cases.push_back(c);
          }
        }
      }
    }
    for (std::int64_t hidden : {8192, 16384, 32768}) {
      for (int ctas : {0, -1}) {
        Case c;
        c.dtype = dtype;
        c.mode = Mode::kOutputAndResidual;
        c.batch = 300;
        c.hidden = hidden;
        c.tuning.ctas_per_row = ctas;
        cases.push_back(c);
      }
    }
  }
  // The suite's largest batch at its hidden size; the other dtypes in OUTPUT mode only, to
  // keep the run short.
  for (DType dtype : kDTypes) {
    for (Mode mode : kModes) {
      if (dtype != DType::kBF16 && mode != Mode::kOutput) continue;
      Case c;
      c.dtype = dtype;
      c.mode = mode;
      c.batch = 16254;
      c.hidden = 2048;
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<Case> UnfusedCases() {
  std::vector<Case> cases;
  for (DType dtype : kDTypes) {
    for (Mode mode : kModes) {
      for (std::int64_t hidden : {7, 2048, 5000, 32768}) {
        for (bool misaligned : {false, true}) {
          Case c;
          c.impl = Impl::kUnfused;
          c.dtype = dtype;
          c.mode = mode;
          c.batch = 257;
          c.hidden = hidden;
          c.misaligned = misaligned;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedKernel, ::testing::ValuesIn(FusedCases()), CaseName);
INSTANTIATE_TEST_SUITE_P(Shapes, UnfusedKernel, ::testing::ValuesIn(UnfusedCases()), CaseName);

class FusedKernelApi : public GpuTest {};

TEST_F(FusedKernelApi, RejectsInvalidArguments) {
  OffsetDeviceBuffer buffer(1 << 16, 0);
  ASSERT_TRUE(buffer.ok());
  FusedAddRmsNormArgs args;
  args.batch = 1;
  args.hidden = 2048;
  args.hidden_states = args.residual = args.weight = buffer.data();
  args.output = buffer.data();
  args.batch = 0;
  EXPECT_EQ(LaunchFusedAddRmsNorm(args, nullptr), cudaErrorInvalidValue);
  args.batch = 1;
  args.mode = Mode::kOutputAndResidual;  // residual_out missing
  EXPECT_EQ(LaunchFusedAddRmsNorm(args, nullptr), cudaErrorInvalidValue);
  EXPECT_STREQ(FusedAddRmsNormVariant(args), "invalid_arguments");
  args.mode = Mode::kOutput;
  EXPECT_EQ(LaunchUnfusedAddRmsNorm(args, nullptr, nullptr), cudaErrorInvalidValue)
      << "kOutput needs scratch";
  KE_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_F(FusedKernelApi, NamesTheVariantItPicks) {
  OffsetDeviceBuffer buffer(1 << 20, 0);
  ASSERT_TRUE(buffer.ok());
  auto* base = static_cast<char*>(buffer.data());
  FusedAddRmsNormArgs args;
  args.hidden = 2048;
  args.hidden_states = args.residual = args.weight = args.output = base;
  args.batch = 1;
  EXPECT_STREQ(FusedAddRmsNormVariant(args), "rows_vec16_latency");
  args.batch = 16254;
  EXPECT_STREQ(FusedAddRmsNormVariant(args), "rows_vec16_bandwidth");
  args.batch = 3;
  args.output = base + 2;
  EXPECT_STREQ(FusedAddRmsNormVariant(args), "rows_scalar_latency");
  args.output = base;
  args.hidden = 1 << 17;
  EXPECT_STREQ(FusedAddRmsNormVariant(args), "cluster_rows_vec16");
  args.hidden = 1 << 19;  // past 8 CTAs of 1024 threads holding 4 vectors each
  EXPECT_STREQ(FusedAddRmsNormVariant(args), "two_pass_vec16");
}

// The same row gives bit-identical results whatever the batch it comes in.
TEST_F(FusedKernelApi, RowResultDoesNotDependOnBatch) {
  constexpr std::int64_t kHidden = 2048;
  constexpr std::int64_t kBatch = 16254;
  const std::size_t bytes = kBatch * kHidden * 2;
  Random rng(42);
  const auto x = RandomTensor(DType::kBF16, kBatch * kHidden, rng);
  const auto r = RandomTensor(DType::kBF16, kBatch * kHidden, rng);
  const auto w = RandomTensor(DType::kBF16, kHidden, rng);
  OffsetDeviceBuffer d_x(bytes, 0), d_r(bytes, 0), d_w(w.size(), 0), d_out(bytes, 0);
  ASSERT_TRUE(d_x.ok() && d_r.ok() && d_w.ok() && d_out.ok());
  KE_CUDA_CHECK(cudaMemcpy(d_x.data(), x.data(), bytes, cudaMemcpyHostToDevice));
  KE_CUDA_CHECK(cudaMemcpy(d_r.data(), r.data(), bytes, cudaMemcpyHostToDevice));
  KE_CUDA_CHECK(cudaMemcpy(d_w.data(), w.data(), w.size(), cudaMemcpyHostToDevice));
  FusedAddRmsNormArgs args;
  args.hidden = kHidden;
  args.hidden_states = d_x.data();
  args.residual = d_r.data();
  args.weight = d_w.data();
  args.output = d_out.data();
  std::vector<std::uint8_t> all(bytes);
  args.batch = kBatch;
  KE_CUDA_CHECK(LaunchFusedAddRmsNorm(args, nullptr));
  KE_CUDA_CHECK(cudaMemcpy(all.data(), d_out.data(), bytes, cudaMemcpyDeviceToHost));
  std::vector<std::uint8_t> one(kHidden * 2);
  args.batch = 1;
  KE_CUDA_CHECK(LaunchFusedAddRmsNorm(args, nullptr));
  KE_CUDA_CHECK(cudaMemcpy(one.data(), d_out.data(), one.size(), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin()));
}

// Four in-place calls, each reading what the previous one wrote, captured in one CUDA graph
// (with programmatic dependent launch, as the launcher uses it) and run eagerly: both must
// match the CPU implementation applied four times. Needs each call to wait for the previous
// one's writes before its first load.
TEST_F(FusedKernelApi, ChainedInPlaceCallsInAGraphSeeEachOthersWrites) {
  for (const std::int64_t batch : {3, 20000}) {
    for (const bool graph : {false, true}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + (graph ? " graph" : " stream"));
      constexpr std::int64_t kHidden = 1024;
      constexpr int kCalls = 4;
      const std::size_t n = batch * kHidden;
      const std::size_t bytes = n * sizeof(float);
      Random rng(7 + batch);
      auto x = RandomTensor(DType::kFP32, n, rng);
      auto r = RandomTensor(DType::kFP32, n, rng);
      const auto w = RandomTensor(DType::kFP32, kHidden, rng);
      OffsetDeviceBuffer d_x(bytes, 0), d_r(bytes, 0), d_w(w.size(), 0);
      ASSERT_TRUE(d_x.ok() && d_r.ok() && d_w.ok());
      KE_CUDA_CHECK(cudaMemcpy(d_x.data(), x.data(), bytes, cudaMemcpyHostToDevice));
      KE_CUDA_CHECK(cudaMemcpy(d_r.data(), r.data(), bytes, cudaMemcpyHostToDevice));
      KE_CUDA_CHECK(cudaMemcpy(d_w.data(), w.data(), w.size(), cudaMemcpyHostToDevice));

      FusedAddRmsNormArgs args;
      args.dtype = DType::kFP32;
      args.mode = Mode::kInPlace;
      args.batch = batch;
      args.hidden = kHidden;
      args.hidden_states = args.output = d_x.data();
      args.residual = args.residual_out = d_r.data();
      args.weight = d_w.data();
      CudaStream stream;
      KE_CUDA_CHECK(CreateCudaStream(&stream));
      if (graph) {
        KE_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < kCalls; ++i) KE_CUDA_CHECK(LaunchFusedAddRmsNorm(args, stream.get()));
        cudaGraph_t raw_graph = nullptr;
        KE_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &raw_graph));
        const CudaGraph captured(raw_graph);
        cudaGraphExec_t raw_exec = nullptr;
        KE_CUDA_CHECK(cudaGraphInstantiate(&raw_exec, captured.get(), 0));
        const CudaGraphExec exec(raw_exec);
        KE_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream.get()));
      } else {
        for (int i = 0; i < kCalls; ++i) KE_CUDA_CHECK(LaunchFusedAddRmsNorm(args, stream.get()));
      }
      KE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));

      FusedAddRmsNormArgs host = args;
      host.hidden_states = host.output = x.data();
      host.residual = host.residual_out = r.data();
      host.weight = w.data();
      for (int i = 0; i < kCalls; ++i) FusedAddRmsNormCpu(host);
      std::vector<double> expect_x(n), expect_r(n);
      for (std::size_t i = 0; i < n; ++i) {
        expect_x[i] = LoadAsFloat(DType::kFP32, x.data(), i);
        expect_r[i] = LoadAsFloat(DType::kFP32, r.data(), i);
      }
      std::vector<std::uint8_t> got(bytes);
      // Four fp32 steps against a CPU that differs in rsqrt and summation order: 1e-4.
      KE_CUDA_CHECK(cudaMemcpy(got.data(), d_x.data(), bytes, cudaMemcpyDeviceToHost));
      ExpectClose(DType::kFP32, got, expect_x, 1e-4, "output after 4 calls");
      KE_CUDA_CHECK(cudaMemcpy(got.data(), d_r.data(), bytes, cudaMemcpyDeviceToHost));
      ExpectClose(DType::kFP32, got, expect_r, 1e-4, "residual after 4 calls");
    }
  }
}

}  // namespace
}  // namespace kerneleval
