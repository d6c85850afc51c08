// The example submissions compiled by kerneleval-compile, loaded by SubmissionLauncher and
// run on the GPU against the CPU implementation: every dtype and mode, odd shapes, outputs
// poisoned first, inputs checked untouched. Skips cleanly without an sm_90 / sm_100 GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "kerneleval/kernels/half_types.h"
#include "server/submissions/compiler.h"
#include "server/submissions/cuda_launcher.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

std::string Arch() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  return ArchForComputeCapability(std::to_string(prop.major) + "." + std::to_string(prop.minor));
}

// The build's paths, or, where the test runs from a bundle on another machine, the
// environment's: KERNELEVAL_COMPILE_TOOL and KERNELEVAL_EXAMPLES_DIR.
std::string FromEnvironment(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built;
}

std::string ReadExample(const std::string& name) {
  std::ifstream in(FromEnvironment("KERNELEVAL_EXAMPLES_DIR", KERNELEVAL_TEST_EXAMPLES_DIR) + "/" +
                   name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;

DevicePtr Upload(const std::vector<unsigned char>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(host.size(), 16)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return DevicePtr(p);
}

std::vector<unsigned char> Download(const DevicePtr& p, std::size_t bytes) {
  std::vector<unsigned char> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), p.get(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

std::vector<unsigned char> Random(DType dtype, std::size_t n, std::mt19937* rng) {
  std::vector<unsigned char> bytes(n * ElementSize(dtype));
  std::normal_distribution<float> dist(0.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) StoreFromFloat(dtype, bytes.data(), i, dist(*rng));
  return bytes;
}

struct Example {
  const char* file;
  const char* entry;  // {} is replaced by the dtype's number
  std::uint32_t block, rows_per_block;
  bool pdl;
};

class LauncherGpu : public ::testing::TestWithParam<Example> {};

TEST_P(LauncherGpu, MatchesTheCpuImplementation) {
  const std::string arch = Arch();
  if (arch.empty()) GTEST_SKIP() << "no sm_90 or sm_100 GPU";
  const Example& e = GetParam();
  CompilerOptions co;
  co.tool_path = FromEnvironment("KERNELEVAL_COMPILE_TOOL", KERNELEVAL_TEST_COMPILE_TOOL);
  co.library_path = FromEnvironment("LD_LIBRARY_PATH", "");  // a bundle's libraries
  Compiler compiler(co);
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    std::string entry = e.entry;
    if (const auto at = entry.find("{}"); at != std::string::npos) {
      entry.replace(at, 2, std::to_string(static_cast<int>(dtype)));
    }
    internal::CompileRequest request;
    request.set_source(ReadExample(e.file));
    request.set_arch(arch);
    request.add_entries(entry);
    absl::StatusOr<internal::CompileResponse> compiled = compiler.Compile("test", request);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    for (Mode mode : {Mode::kOutput, Mode::kOutputAndResidual, Mode::kInPlace}) {
      v1::Submission sub;
      sub.set_id("sub-test");
      sub.mutable_spec()->set_target_arch(arch);
      sub.mutable_spec()->set_dtype(dtype == DType::kBF16   ? v1::DTYPE_BF16
                                    : dtype == DType::kFP16 ? v1::DTYPE_FP16
                                                            : v1::DTYPE_FP32);
      sub.mutable_spec()->set_mode(mode == Mode::kOutput              ? v1::MODE_OUTPUT
                                   : mode == Mode::kOutputAndResidual ? v1::MODE_OUTPUT_AND_RESIDUAL
                                                                      : v1::MODE_IN_PLACE);
      v1::KernelLaunch* k = sub.mutable_spec()->mutable_launch_plan()->add_kernels();
      k->set_entry(entry);
      k->set_block_size(e.block);
      k->set_rows_per_block(e.rows_per_block);
      k->set_pdl(e.pdl);
      *sub.mutable_diagnostics() = compiled->diagnostics();
      absl::StatusOr<std::unique_ptr<SubmissionLauncher>> launcher =
          SubmissionLauncher::Load(sub, compiled->cubin());
      ASSERT_TRUE(launcher.ok()) << launcher.status();
      std::mt19937 rng(7);
      for (std::int64_t batch : {1, 3, 257}) {
        for (std::int64_t hidden : {1, 7, 111, 2048, 5000}) {
          SCOPED_TRACE(std::string(e.file) + " " + DTypeName(dtype) + " " + ModeName(mode) +
                       " batch " + std::to_string(batch) + " hidden " + std::to_string(hidden));
          const std::size_t n = static_cast<std::size_t>(batch * hidden);
          const std::size_t bytes = n * ElementSize(dtype);
          const auto x = Random(dtype, n, &rng), r = Random(dtype, n, &rng);
          const auto w = Random(dtype, static_cast<std::size_t>(hidden), &rng);
          std::vector<unsigned char> want_out(bytes), want_res(bytes);
          FusedAddRmsNormArgs host;
          host.dtype = dtype;
          host.mode = mode == Mode::kInPlace ? Mode::kOutputAndResidual : mode;
          host.batch = batch;
          host.hidden = hidden;
          host.hidden_states = x.data();
          host.residual = r.data();
          host.weight = w.data();
          host.output = want_out.data();
          host.residual_out = want_res.data();
          FusedAddRmsNormCpu(host);

          DevicePtr dx = Upload(x), dr = Upload(r), dw = Upload(w);
          const std::vector<unsigned char> poison(bytes, 0xff);  // NaN in every dtype
          DevicePtr dout = Upload(poison), dres = Upload(poison);
          FusedAddRmsNormArgs args = host;
          args.mode = mode;
          args.hidden_states = dx.get();
          args.residual = dr.get();
          args.weight = dw.get();
          args.output = mode == Mode::kInPlace ? dx.get() : dout.get();
          args.residual_out = mode == Mode::kInPlace             ? dr.get()
                              : mode == Mode::kOutputAndResidual ? dres.get()
                                                                 : nullptr;
          ASSERT_EQ((*launcher)->Launch(args, nullptr, nullptr), cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const auto got_out = Download(mode == Mode::kInPlace ? dx : dout, bytes);
          const double tol = dtype == DType::kBF16 ? 1e-2 : dtype == DType::kFP16 ? 2e-3 : 1e-5;
          for (std::size_t i = 0; i < n; ++i) {
            const float g = LoadAsFloat(dtype, got_out.data(), i);
            const float want = LoadAsFloat(dtype, want_out.data(), i);
            ASSERT_LE(std::fabs(g - want), tol + tol * std::fabs(want)) << "output " << i;
          }
          if (mode != Mode::kOutput) {
            const auto got_res = Download(mode == Mode::kInPlace ? dr : dres, bytes);
            EXPECT_EQ(std::memcmp(got_res.data(), want_res.data(), bytes), 0);
          } else {
            EXPECT_EQ(Download(dx, bytes), x);  // inputs untouched
            EXPECT_EQ(Download(dr, bytes), r);
          }
        }
      }
      FusedAddRmsNormArgs other;
      other.dtype = dtype == DType::kFP32 ? DType::kBF16 : DType::kFP32;
      other.mode = mode;
      other.batch = 1;
      other.hidden = 1;
      EXPECT_EQ((*launcher)->Launch(other, nullptr, nullptr), cudaErrorInvalidValue);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Examples, LauncherGpu,
    ::testing::Values(Example{"naive_block_per_row.cu", "naive_block_per_row", 256, 1, false},
                      Example{"warp_per_row_vec.cu", "warp_per_row_vec", 256, 8, false},
                      Example{"fused_rows_vec16.cu", "fused_rows_vec16<{}>", 128, 1, true}),
    [](const ::testing::TestParamInfo<Example>& info) {
      return std::string(info.param.file).substr(0, std::string(info.param.file).find('.'));
    });

// What a launch gets, field by field, from one call (host code only: runs without a GPU).
// inv_hidden is the built-in launcher's 1.0f / hidden, rounded once.
TEST(MakeParams, EveryFieldFromTheCall) {
  alignas(16) static unsigned char memory[16384];
  FusedAddRmsNormArgs a;
  a.dtype = DType::kFP16;
  a.mode = Mode::kOutputAndResidual;
  a.batch = 3;
  a.hidden = 768;
  a.eps = 1e-5f;
  a.hidden_states = memory;
  a.residual = memory + 1536 * 3;
  a.weight = memory + 2 * 1536 * 3;
  a.output = memory + 2 * 1536 * 3 + 1536;
  a.residual_out = memory + 3 * 1536 * 3;
  void* scratch = memory + 4096;
  const kerneleval_params p = MakeParams(a, scratch, 4608, 132, 1, 2);
  EXPECT_EQ(p.hidden_states, a.hidden_states);
  EXPECT_EQ(p.residual, a.residual);
  EXPECT_EQ(p.weight, a.weight);
  EXPECT_EQ(p.output, a.output);
  EXPECT_EQ(p.residual_out, a.residual_out);
  EXPECT_EQ(p.scratch, scratch);
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.hidden, 768);
  EXPECT_EQ(p.eps, 1e-5f);
  EXPECT_EQ(p.inv_hidden, 1.0f / 768.0f);
  EXPECT_EQ(p.dtype, KERNELEVAL_DTYPE_FP16);
  EXPECT_EQ(p.mode, KERNELEVAL_MODE_OUTPUT_AND_RESIDUAL);
  for (long long stride :
       {p.hidden_states_stride, p.residual_stride, p.output_stride, p.residual_out_stride}) {
    EXPECT_EQ(stride, 768);
  }
  EXPECT_EQ(p.scratch_bytes, 4608);
  EXPECT_EQ(p.sm_count, 132);
  EXPECT_EQ(p.kernel_index, 1);
  EXPECT_EQ(p.num_kernels, 2);
  EXPECT_EQ(p.abi_version, KERNELEVAL_ABI_VERSION);
  EXPECT_EQ(p.reserved, 0);

  // OUTPUT mode: no residual_out, and its stride says so.
  a.mode = Mode::kOutput;
  const kerneleval_params out_only = MakeParams(a, nullptr, 0, 132, 0, 1);
  EXPECT_EQ(out_only.residual_out, nullptr);
  EXPECT_EQ(out_only.residual_out_stride, 0);
  EXPECT_EQ(out_only.scratch, nullptr);
  EXPECT_EQ(out_only.scratch_bytes, 0);
}

}  // namespace
}  // namespace kerneleval::server::submissions
