// The checks of every call of a submitted kernel (server/device/call_checks.h) on a GPU,
// through the CUDA backend itself: the honest built-in kernel and the honest PDL example pass them
// in every dtype, mode, odd shape and protocol (a check that rejects honest kernels would be worse
// than none); a kernel that skips rows on its later calls into the same buffer is caught at its
// first one; and the planted cheats of tests/gpu/cheats, compiled by kerneleval-compile and loaded
// as submissions, are caught in hot and graph replay, each Measure starting from fresh module
// state.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/input_generator.h"
#include "lazy_half_rows.h"
#include "server/cuda/cuda_backend.h"
#include "server/cuda/cuda_call_checks_runner.h"
#include "server/cuda/cuda_workspace.h"
#include "server/evaluation/evaluation.h"
#include "server/figures/correctness.h"
#include "server/submissions/compiler.h"
#include "server/submissions/source_rules.h"

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
    impls.push_back(kerneleval::testing::LazyHalfRowsImplementation());
    impls.push_back(ScratchCopyImplementation());
    backend_ = new CudaBackend(0, std::move(impls));
    backend_->AllowSubmissions();
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
  // (In hot and graph replay every call has an output slot of its own, so this host-side
  // trick never finds its buffer again: the device-side cheats below are caught there.)
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

// The planted cheats and the examples, compiled by kerneleval-compile and loaded as
// submissions. The build's paths, or, where the test runs from a bundle on another machine,
// the environment's: KERNELEVAL_COMPILE_TOOL and KERNELEVAL_SOURCE_DIR (the repository).
std::string FromEnvironment(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built;
}

std::string ReadSource(const std::string& relative) {
  std::ifstream in(FromEnvironment("KERNELEVAL_SOURCE_DIR", KERNELEVAL_TEST_SOURCE_DIR) + "/" +
                   relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Arch() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  return submissions::ArchForComputeCapability(std::to_string(prop.major) + "." +
                                               std::to_string(prop.minor));
}

// Registers `source` with the backend as submission `id`: bf16, `mode`, one CTA of `block`
// threads per row.
absl::Status Submit(CudaBackend* backend, const std::string& id, const std::string& source,
                    const std::string& entry, std::uint32_t block, bool pdl,
                    v1::Mode mode = v1::MODE_OUTPUT, bool scratch = false) {
  submissions::CompilerOptions co;
  co.tool_path = FromEnvironment("KERNELEVAL_COMPILE_TOOL", KERNELEVAL_TEST_COMPILE_TOOL);
  co.library_path = FromEnvironment("LD_LIBRARY_PATH", "");  // a bundle's libraries
  submissions::Compiler compiler(co);
  internal::CompileRequest request;
  request.set_source(source);
  request.set_arch(Arch());
  request.add_entries(entry);
  absl::StatusOr<internal::CompileResponse> compiled = compiler.Compile("test", request);
  if (!compiled.ok()) return compiled.status();
  SubmittedKernel kernel;
  kernel.submission.set_id(id);
  v1::SubmissionSpec& spec = *kernel.submission.mutable_spec();
  spec.set_name(id);
  spec.set_target_arch(Arch());
  spec.set_dtype(v1::DTYPE_BF16);
  spec.set_mode(mode);
  v1::KernelLaunch* k = spec.mutable_launch_plan()->add_kernels();
  k->set_entry(entry);
  k->set_block_size(block);
  k->set_rows_per_block(1);
  k->set_pdl(pdl);
  spec.mutable_launch_plan()->set_needs_scratch(scratch);
  *kernel.submission.mutable_diagnostics() = compiled->diagnostics();
  kernel.cubin = compiled->cubin();
  return backend->AddSubmission(kernel);
}

absl::Status SubmitCheat(CudaBackend* backend, const std::string& cheat, bool pdl = false,
                         v1::Mode mode = v1::MODE_OUTPUT, const std::string& id = "",
                         bool scratch = false) {
  return Submit(
      backend, id.empty() ? cheat : id,
      ReadSource("tests/gpu/cheats/common.cuh") + ReadSource("tests/gpu/cheats/" + cheat + ".cu"),
      cheat, 256, pdl, mode, scratch);
}

#define ASSERT_OK_STATUS(expr)         \
  do {                                 \
    const absl::Status ke_s_ = (expr); \
    ASSERT_TRUE(ke_s_.ok()) << ke_s_;  \
  } while (false)

class PlantedCheatsGpu : public CallChecksGpu {
 protected:
  void SetUp() override {
    CallChecksGpu::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (Arch().empty()) GTEST_SKIP() << "no sm_90 or sm_100 GPU";
  }
};

MeasureOptions Graph(std::uint32_t calls) {
  MeasureOptions o = Protocol(false, true, false, v1::TIMER_CUDA_EVENTS);
  o.graph_calls = calls;
  return o;
}

// Each was ranked in hot graph replay when only the last call into an input set was
// checked (docs/results/submissions-h200.md); each must now fail a check there, and in hot
// replay without a graph.
TEST_F(PlantedCheatsGpu, CaughtInHotAndGraphReplay) {
  ASSERT_OK_STATUS(SubmitCheat(backend_, "output_inspect"));
  ASSERT_OK_STATUS(SubmitCheat(backend_, "probe_one_per_row"));
  ASSERT_OK_STATUS(SubmitCheat(backend_, "call_counter"));
  ASSERT_OK_STATUS(SubmitCheat(backend_, "pdl_wait_late", /*pdl=*/true));
  ASSERT_OK_STATUS(SubmitCheat(backend_, "pdl_wait_late", /*pdl=*/true, v1::MODE_IN_PLACE,
                               "pdl_wait_late_in_place"));
  for (std::int64_t batch : {1, 79, 2048}) {
    const Problem p{DType::kBF16, Mode::kOutput, batch, 2048, 1e-6f};
    for (const char* cheat : {"output_inspect", "probe_one_per_row", "call_counter"}) {
      for (const MeasureOptions& o :
           {Graph(20), Protocol(false, false, false, v1::TIMER_CUDA_EVENTS)}) {
        const Measurement m = MeasureChecked(p, o, cheat);
        EXPECT_NE(m.call_check_failure, "") << cheat << " batch " << batch << " graph " << o.graph;
        EXPECT_GT(m.calls_checked, 0u);
      }
    }
    // Overlap needs consecutive launches and room on the GPU for the next call's CTAs while
    // the previous call's run: graph replay at batches below the CTAs an H200 holds at once.
    // At 2048 rows a call's CTAs start only as its predecessor's retire, after they have
    // written, so the early reads see the right values: nothing is gained, nothing to catch.
    if (batch >= 2048) continue;
    const Measurement m = MeasureChecked(p, Graph(50), "pdl_wait_late");
    EXPECT_NE(m.call_check_failure, "") << "pdl_wait_late batch " << batch;
    EXPECT_EQ(m.calls_checked, 50u * (1 + 3 + 1 + 9)) << "every call of every replay";
    // In IN_PLACE the calls are chained through the residual they share.
    const Problem in_place{DType::kBF16, Mode::kInPlace, batch, 2048, 1e-6f};
    EXPECT_NE(MeasureChecked(in_place, Graph(50), "pdl_wait_late_in_place").call_check_failure, "")
        << "pdl_wait_late in place, batch " << batch;
  }
}

// A pdl kernel that never waits is refused at registration (tests/submissions), and again
// when a device host loads it (a record stored before the compile reported the wait).
TEST_F(PlantedCheatsGpu, PdlWithoutAWaitIsRefusedAtLoad) {
  const absl::Status s = SubmitCheat(backend_, "pdl_no_wait", /*pdl=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("kernels[0].pdl"), absl::string_view::npos) << s;
  EXPECT_TRUE(
      SubmitCheat(backend_, "pdl_no_wait", /*pdl=*/false, v1::MODE_OUTPUT, "pdl_no_wait_in_order")
          .ok());
}

// The honest example registered with PDL waits before it reads: it passes every protocol.
TEST_F(PlantedCheatsGpu, HonestPdlExamplePasses) {
  ASSERT_OK_STATUS(Submit(backend_, "fused_rows_vec16",
                          ReadSource("examples/submissions/fused_rows_vec16.cu"),
                          "fused_rows_vec16<0>", 128, /*pdl=*/true));
  ASSERT_OK_STATUS(Submit(backend_, "fused_rows_vec16_in_place",
                          ReadSource("examples/submissions/fused_rows_vec16.cu"),
                          "fused_rows_vec16<0>", 128, /*pdl=*/true, v1::MODE_IN_PLACE));
  for (std::int64_t batch : {1, 79, 2048}) {
    const Problem p{DType::kBF16, Mode::kOutput, batch, 2048, 1e-6f};
    for (const MeasureOptions& o : {Graph(50), Protocol(false, false, false, v1::TIMER_CUDA_EVENTS),
                                    Protocol(true, false, false, v1::TIMER_CUDA_EVENTS),
                                    Protocol(true, true, true, v1::TIMER_CUDA_EVENTS)}) {
      const Measurement m = MeasureChecked(p, o, "fused_rows_vec16");
      EXPECT_EQ(m.call_check_failure, "") << "batch " << batch << " graph " << o.graph;
      const Problem in_place{DType::kBF16, Mode::kInPlace, batch, 2048, 1e-6f};
      EXPECT_EQ(MeasureChecked(in_place, o, "fused_rows_vec16_in_place").call_check_failure, "")
          << "in place, batch " << batch << " graph " << o.graph;
    }
  }
}

// call_counter computes its first call after a load and skips the next ones. With the
// module loaded again before every Measure, each Measure's result call (checked here on
// the host, as Evaluate does) is a first call, and the Measure's own checked call is a
// second one, caught. Loaded once, the second Measure's result call would be skipped.
TEST_F(PlantedCheatsGpu, EveryMeasureStartsFromFreshModuleState) {
  ASSERT_OK_STATUS(SubmitCheat(backend_, "call_counter"));
  const Problem p{DType::kBF16, Mode::kOutput, 64, 2048, 1e-6f};
  MeasureOptions o = Protocol(false, false, false, v1::TIMER_CUDA_EVENTS);
  o.warmup = 0;
  o.repetitions = 1;
  o.check_calls = true;
  o.check_tolerance = DefaultTolerance(p.dtype);
  for (int round = 0; round < 3; ++round) {
    const auto x = RandomTensor(p.dtype, p.TensorElements(), 100 + round);
    const auto r = RandomTensor(p.dtype, p.TensorElements(), 200 + round);
    const auto w = RandomTensor(p.dtype, 2048, 300 + round);
    const HostInputs inputs{x.data(), r.data(), w.data()};
    std::vector<unsigned char> out(p.TensorBytes(), 0xff);
    absl::StatusOr<Measurement> m =
        backend_->Measure(p, inputs, {out.data(), nullptr}, "call_counter", o);
    ASSERT_TRUE(m.ok()) << m.status();
    const v1::Correctness c = CheckOutputs(p, {out.data(), nullptr}, ComputeReference(p, inputs),
                                           DefaultTolerance(p.dtype));
    EXPECT_TRUE(c.passed()) << "round " << round << ": " << c.detail();
    EXPECT_EQ(m->call_check_failure.rfind("timed call 1 of 1: output[", 0), 0u)
        << "round " << round << ": " << m->call_check_failure;
  }
}

// What forge_records finds at the start of its scratch buffer (tests/gpu/cheats).
struct ForgePlant {
  void* records;
  unsigned long long records_bytes;
  unsigned long long records_count;
  unsigned long long ticket;
};

// Plants the records' address in every input set's scratch buffer (queued on the stream
// after the buffer was zeroed).
void PlantRecords(const CudaWorkspace& w) {
  static ForgePlant plant;  // read by the copy before the hook's caller synchronizes
  plant = {w.checks.records.get(), w.checks.records.bytes(), w.checks.plan.records, 0};
  for (const CudaBufferSet* set : w.sets) {
    if (set->scratch.get() == nullptr) continue;
    cudaMemcpyAsync(set->scratch.get(), &plant, sizeof(plant), cudaMemcpyHostToDevice, w.stream);
  }
}

// forge_records leaves half of its rows unwritten on every checked call but the last and
// wipes the records (its own ahead of its check, the earlier ones' findings after theirs):
// with records judged only at the end it passed. Each record is now reset after its call
// and read back before the next one: the first call's findings stand.
TEST_F(PlantedCheatsGpu, ForgedCheckRecordsAreRejected) {
  ASSERT_OK_STATUS(SubmitCheat(backend_, "forge_records", /*pdl=*/false, v1::MODE_OUTPUT, "",
                               /*scratch=*/true));
  SetCheckRecordsHookForTesting(&PlantRecords);
  const Problem p{DType::kBF16, Mode::kOutput, 64, 2048, 1e-6f};
  const Measurement m =
      MeasureChecked(p, Protocol(true, false, false, v1::TIMER_CUDA_EVENTS), "forge_records");
  SetCheckRecordsHookForTesting(nullptr);
  EXPECT_EQ(m.calls_checked, 12u);
  // Without the plant the cheat is honest throughout and this fails too.
  EXPECT_EQ(m.call_check_failure.rfind("warm-up call 1 of 3: output[", 0), 0u)
      << m.call_check_failure;
}

}  // namespace
}  // namespace kerneleval::server
