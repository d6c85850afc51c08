// The checks of every call of a submitted kernel (server/call_checks.h) on a GPU, through the
// CUDA backend itself: the honest built-in kernel passes them in every dtype, mode, odd shape
// and protocol (a check that rejects honest kernels would be worse than none), and a kernel
// that skips rows on its later calls into the same buffer is caught at its first one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/input_generator.h"
#include "server/correctness.h"
#include "server/cuda_backend.h"

namespace kerneleval::server {
namespace {

// Test only: its output is whatever its scratch buffer holds when it is called, so that a
// test sees what a submission would find there.
CudaImplementation ScratchCopyImplementation() {
  return {"scratch_copy", "Test only: copies its scratch buffer into the output", true,
          [](const FusedAddRmsNormArgs& a, void* scratch, cudaStream_t s) {
            return cudaMemcpyAsync(
                a.output, scratch,
                static_cast<std::size_t>(a.batch * a.hidden) * ElementSize(a.dtype),
                cudaMemcpyDeviceToDevice, s);
          },
          /*test_only=*/true};
}

class CallChecksGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (CudaBackend::DeviceCount() == 0) return;
    std::vector<CudaImplementation> impls = BuiltinCudaImplementations();
    impls.push_back(LazyHalfRowsImplementation());
    impls.push_back(ScratchCopyImplementation());
    backend_ = new CudaBackend(0, std::move(impls));
    warm_ = backend_->WarmUp();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << "no CUDA device, GPU tests skipped";
    ASSERT_TRUE(warm_.ok()) << warm_;
  }

  // One measurement of `impl` with every call checked; the caller's outputs are checked on
  // the host as Evaluate would.
  static Measurement MeasureChecked(const Problem& p, MeasureOptions o, const std::string& impl) {
    const auto x = RandomTensor(p.dtype, p.TensorElements(), 1);
    const auto r = RandomTensor(p.dtype, p.TensorElements(), 2);
    const auto w = RandomTensor(p.dtype, static_cast<std::size_t>(p.hidden), 3);
    std::vector<unsigned char> out(p.TensorBytes(), 0xff), res(p.TensorBytes(), 0xff);
    o.check_calls = true;
    o.check_tolerance = DefaultTolerance(p.dtype);
    absl::StatusOr<Measurement> m =
        backend_->Measure(p, {x.data(), r.data(), w.data()}, {out.data(), res.data()}, impl, o);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : Measurement{};
  }

  static CudaBackend* backend_;
  static absl::Status warm_;
};

CudaBackend* CallChecksGpu::backend_ = nullptr;
absl::Status CallChecksGpu::warm_;

MeasureOptions Protocol(bool cold, bool graph, bool rotate, v1::Timer timer) {
  MeasureOptions o;
  o.warmup = 3;
  o.repetitions = 9;
  o.cold = cold;
  o.graph = graph;
  o.graph_calls = 5;
  o.rotate_inputs = rotate;
  o.timer = timer;
  return o;
}

// Each measurement waits for settled clocks (up to 1.5 s): every dtype, mode and shape under
// the two kinds of plan, and every protocol on two of them.
TEST_F(CallChecksGpu, HonestKernelPassesEveryDtypeModeShapeAndProtocol) {
  const std::vector<MeasureOptions> protocols = {
      Protocol(true, false, false, v1::TIMER_CUDA_EVENTS),   // every call
      Protocol(false, true, false, v1::TIMER_CUDA_EVENTS),   // after the window
      Protocol(true, false, false, v1::TIMER_UNSPECIFIED),   // CUPTI where available
      Protocol(true, false, true, v1::TIMER_CUDA_EVENTS),    // rotated sets
      Protocol(false, false, false, v1::TIMER_CUDA_EVENTS),  // hot
      Protocol(false, false, true, v1::TIMER_CUDA_EVENTS),   // hot, rotated
      Protocol(true, true, true, v1::TIMER_CUDA_EVENTS),     // cold graph, rotated
  };
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {1, 7}, {3, 111}, {257, 2048}, {5, 5000}};
  auto expect_pass = [](const Problem& p, const MeasureOptions& o, std::size_t i) {
    const Measurement m = MeasureChecked(p, o, "cuda_fused");
    EXPECT_EQ(m.call_check_failure, "") << DTypeName(p.dtype) << " " << ModeName(p.mode) << " "
                                        << p.batch << "x" << p.hidden << " protocol " << i;
    EXPECT_GT(m.calls_checked, 0u) << "protocol " << i;
  };
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    for (Mode mode : {Mode::kOutput, Mode::kOutputAndResidual, Mode::kInPlace}) {
      for (const auto& [batch, hidden] : shapes) {
        for (std::size_t i = 0; i < 2; ++i) {
          expect_pass(Problem{dtype, mode, batch, hidden, 1e-6f}, protocols[i], i);
        }
      }
    }
  }
  for (const Problem& p : {Problem{DType::kBF16, Mode::kOutput, 257, 2048, 1e-6f},
                           Problem{DType::kFP32, Mode::kInPlace, 3, 111, 1e-6f}}) {
    for (std::size_t i = 2; i < protocols.size(); ++i) expect_pass(p, protocols[i], i);
  }
}

TEST_F(CallChecksGpu, LargeBatchesPass) {
  for (const Problem& p : {Problem{DType::kBF16, Mode::kOutput, 16254, 2048, 1e-6f},
                           Problem{DType::kFP32, Mode::kOutputAndResidual, 2048, 32768, 1e-6f}}) {
    const Measurement m =
        MeasureChecked(p, Protocol(true, false, false, v1::TIMER_UNSPECIFIED), "cuda_fused");
    EXPECT_EQ(m.call_check_failure, "") << p.batch << "x" << p.hidden;
    EXPECT_EQ(m.calls_checked, 12u);
  }
}

TEST_F(CallChecksGpu, SkippedRowsAreCaughtAtTheFirstCheckedCall) {
  // lazy_half_rows computes half the rows on its second call into the same output buffer:
  // the first warm-up call reuses the result call's buffers.
  const Problem p{DType::kBF16, Mode::kOutput, 64, 2048, 1e-6f};
  const Measurement cold =
      MeasureChecked(p, Protocol(true, false, false, v1::TIMER_CUDA_EVENTS), "lazy_half_rows");
  EXPECT_EQ(cold.call_check_failure.rfind("warm-up call 1 of 3: output[32, ", 0), 0u)
      << cold.call_check_failure;
  const Measurement graph =
      MeasureChecked(p, Protocol(false, true, false, v1::TIMER_CUDA_EVENTS), "lazy_half_rows");
  EXPECT_EQ(graph.call_check_failure.rfind("the last call into input set 1 of 1", 0), 0u)
      << graph.call_check_failure;
}

// Scratch buffers are kept from one measurement to the next, so the two-kernel baseline's
// sums of one caller's inputs would still be there for the next kernel given a scratch
// buffer of that size. Checked code (every submission) must find zeros instead.
TEST_F(CallChecksGpu, CheckedCallsFindAZeroedScratchBuffer) {
  const Problem p{DType::kBF16, Mode::kOutput, 64, 2048, 1e-6f};
  const auto x = RandomTensor(p.dtype, p.TensorElements(), 11);
  const auto r = RandomTensor(p.dtype, p.TensorElements(), 12);
  const auto w = RandomTensor(p.dtype, 2048, 13);
  std::vector<unsigned char> out(p.TensorBytes());
  ASSERT_TRUE(backend_
                  ->Measure(p, {x.data(), r.data(), w.data()}, {out.data(), nullptr},
                            "cuda_unfused", Protocol(true, false, false, v1::TIMER_CUDA_EVENTS))
                  .ok());
  // Unchecked, scratch_copy shows the baseline's sums: the buffer is the same one.
  std::vector<unsigned char> seen(p.TensorBytes(), 0);
  ASSERT_TRUE(backend_
                  ->Measure(p, {x.data(), r.data(), w.data()}, {seen.data(), nullptr},
                            "scratch_copy", Protocol(true, false, false, v1::TIMER_CUDA_EVENTS))
                  .ok());
  EXPECT_NE(std::count(seen.begin(), seen.end(), 0), static_cast<std::ptrdiff_t>(seen.size()))
      << "the scratch buffer was not kept: this test no longer tests anything";
  // The baseline again, then the same copy checked: zeros, and the check fails the output.
  ASSERT_TRUE(backend_
                  ->Measure(p, {x.data(), r.data(), w.data()}, {out.data(), nullptr},
                            "cuda_unfused", Protocol(true, false, false, v1::TIMER_CUDA_EVENTS))
                  .ok());
  std::vector<unsigned char> checked(p.TensorBytes(), 0xff);
  MeasureOptions o = Protocol(true, false, false, v1::TIMER_CUDA_EVENTS);
  o.check_calls = true;
  o.check_tolerance = DefaultTolerance(p.dtype);
  absl::StatusOr<Measurement> m = backend_->Measure(p, {x.data(), r.data(), w.data()},
                                                    {checked.data(), nullptr}, "scratch_copy", o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::count(checked.begin(), checked.end(), 0),
            static_cast<std::ptrdiff_t>(checked.size()));
  EXPECT_NE(m->call_check_failure, "");
}

TEST_F(CallChecksGpu, BuiltinsAreNotCheckedUnlessAsked) {
  const Problem p{DType::kBF16, Mode::kOutput, 8, 2048, 1e-6f};
  const auto x = RandomTensor(p.dtype, p.TensorElements(), 1);
  const auto w = RandomTensor(p.dtype, 2048, 3);
  std::vector<unsigned char> out(p.TensorBytes());
  absl::StatusOr<Measurement> m =
      backend_->Measure(p, {x.data(), x.data(), w.data()}, {out.data(), nullptr}, "lazy_half_rows",
                        Protocol(true, false, false, v1::TIMER_CUDA_EVENTS));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->calls_checked, 0u);
  EXPECT_EQ(m->call_check_failure, "");
}

}  // namespace
}  // namespace kerneleval::server
