// The rules a submission is checked by, without NVRTC or a server.
#include <cstddef>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "kerneleval/submission_abi.h"
#include "server/submissions/abi_flags.h"
#include "server/submissions/compile_output.h"
#include "server/submissions/compiler.h"
#include "server/submissions/launch_plan.h"
#include "server/submissions/registry.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

using ::testing::HasSubstr;

// The layout is the ABI: what a row kernel reads before its first load (the row pointers,
// batch, hidden, flags) and right after its reduction (eps, inv_hidden) lies in the first 48
// bytes, the constant-bank line that also holds the memory descriptor: one fetch for all.
TEST(AbiLayout, WhatARowReadsFirstComesFirst) {
  EXPECT_EQ(sizeof(kerneleval_params), 144u);
  EXPECT_EQ(offsetof(kerneleval_params, hidden_states), 0u);
  EXPECT_EQ(offsetof(kerneleval_params, residual), 8u);
  EXPECT_EQ(offsetof(kerneleval_params, batch), 16u);
  EXPECT_EQ(offsetof(kerneleval_params, hidden), 24u);
  EXPECT_EQ(offsetof(kerneleval_params, flags), 32u);
  EXPECT_EQ(offsetof(kerneleval_params, eps), 36u);
  EXPECT_EQ(offsetof(kerneleval_params, inv_hidden), 40u);
  EXPECT_EQ(offsetof(kerneleval_params, mode), 44u);
  EXPECT_EQ(offsetof(kerneleval_params, weight), 48u);
  EXPECT_EQ(offsetof(kerneleval_params, residual_out), 64u);
  EXPECT_EQ(offsetof(kerneleval_params, scratch), 80u);
  EXPECT_EQ(offsetof(kerneleval_params, hidden_states_stride), 88u);
  EXPECT_EQ(offsetof(kerneleval_params, abi_version), 136u);
  for (long long old : {128, 136}) {
    EXPECT_NE(OldAbiVersion(old), 0) << old;
    EXPECT_NE(sizeof(kerneleval_params), static_cast<std::size_t>(old))
        << "a kernel of an older version must be told apart by its block's size";
  }
  EXPECT_EQ(OldAbiVersion(KERNELEVAL_PARAMS_BYTES), 0);
}

// The flags promise only what holds for the call: an offset, an odd row or a huge tensor
// each withdraws the promise it breaks, and nothing else.
TEST(AbiFlags, SetOnlyWhereTheyHold) {
  alignas(16) static unsigned char memory[4096];
  FusedAddRmsNormArgs a;
  a.dtype = DType::kBF16;
  a.mode = Mode::kOutputAndResidual;
  a.batch = 4;
  a.hidden = 2048;
  a.hidden_states = memory;
  a.residual = memory + 256;
  a.weight = memory + 512;
  a.output = memory + 768;
  a.residual_out = memory + 1024;
  constexpr std::uint32_t kBoth = KERNELEVAL_FLAG_ROWS_ALIGNED16 | KERNELEVAL_FLAG_INDEX32;
  EXPECT_EQ(AbiFlags(a, nullptr), kBoth);
  EXPECT_EQ(AbiFlags(a, memory + 1280), kBoth);
  EXPECT_EQ(AbiFlags(a, memory + 1288), KERNELEVAL_FLAG_INDEX32) << "scratch off 16 bytes";

  FusedAddRmsNormArgs shifted = a;
  shifted.residual_out = memory + 1032;
  EXPECT_EQ(AbiFlags(shifted, nullptr), KERNELEVAL_FLAG_INDEX32);
  shifted = a;
  shifted.weight = memory + 514;
  EXPECT_EQ(AbiFlags(shifted, nullptr), KERNELEVAL_FLAG_INDEX32);

  FusedAddRmsNormArgs odd = a;
  odd.hidden = 2047;  // rows of 4094 bytes: row 1 starts off a 16-byte boundary
  EXPECT_EQ(AbiFlags(odd, nullptr), KERNELEVAL_FLAG_INDEX32);
  odd.dtype = DType::kFP32;
  odd.hidden = 2044;  // 8176 bytes a row: a whole number of 16-byte vectors
  EXPECT_EQ(AbiFlags(odd, nullptr), kBoth);

  FusedAddRmsNormArgs output_only = a;
  output_only.mode = Mode::kOutput;
  output_only.residual_out = nullptr;
  EXPECT_EQ(AbiFlags(output_only, nullptr), kBoth);

  FusedAddRmsNormArgs big = a;
  big.hidden = 65536;
  big.batch = 32767;  // 2^31 - 65536 elements: the last offset still fits
  EXPECT_EQ(AbiFlags(big, nullptr), kBoth);
  big.batch = 32768;  // 2^31 elements
  EXPECT_EQ(AbiFlags(big, nullptr), KERNELEVAL_FLAG_ROWS_ALIGNED16);
}

TEST(Includes, AbiAndCudaHeadersAllowed) {
  EXPECT_TRUE(CheckIncludes("#include <kerneleval/submission_abi.h>\n"
                            "#include \"kerneleval/submission_abi.h\"\n"
                            "  #  include <cuda_bf16.h>\n"
                            "#include <cuda/std/cstdint>\n"
                            "#include <cooperative_groups/reduce.h>\n",
                            "submission.source")
                  .ok());
}

TEST(Includes, OthersRefusedWithTheirLine) {
  const absl::Status s = CheckIncludes("// a kernel\n\n#include <stdio.h>\n", "submission.source");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("submission.source: line 3"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'stdio.h'"));
  for (const char* src :
       {"#include \"/etc/passwd\"\n", "#include <cuda/std/../../x.h>\n",
        "#include \"cuda_bf16.h/../../../etc/passwd\"\n", "#define H <stdio.h>\n#include H\n",
        "#include_next <cuda_bf16.h>\n", "#import <stdio.h>\n", "%:include <stdio.h>\n"}) {
    EXPECT_EQ(CheckIncludes(src, "f").code(), absl::StatusCode::kInvalidArgument) << src;
  }
}

TEST(Includes, SplicesAndCommentsDoNotHideADirective) {
  // A line splice joins "#" and "include"; a block comment between them is a space.
  const absl::Status spliced = CheckIncludes("int x;\n#\\\ninclude <stdio.h>\n", "f");
  EXPECT_EQ(spliced.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spliced.message()), HasSubstr("line 2"));
  EXPECT_EQ(CheckIncludes("#\\ \r\ninclude <stdio.h>\n", "f").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckIncludes("# /* x */ include <stdio.h>\n", "f").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckIncludes("/* a\n comment */ #include <stdio.h>\n", "f").code(),
            absl::StatusCode::kInvalidArgument);
  // Commented out, or inside a string, it is no directive.
  EXPECT_TRUE(CheckIncludes("// #include <stdio.h>\n/*\n#include <stdio.h>\n*/\n"
                            "const char* s = \"#include <stdio.h>\";\n",
                            "f")
                  .ok());
}

TEST(Quote, BoundedWithTheLength) {
  const std::string huge(100000, 'a');
  const std::string q = Quote(huge);
  EXPECT_LT(q.size(), 80u);
  EXPECT_THAT(q, HasSubstr("(100000 bytes)"));
  EXPECT_EQ(Quote("ab\ncd"), "'ab?cd'");
}

TEST(Defines, NamesAndValuesAreChecked) {
  google::protobuf::RepeatedPtrField<v1::Define> defines;
  v1::Define* d = defines.Add();
  d->set_name("ROWS");
  d->set_value("(4 * 2)");
  EXPECT_TRUE(CheckDefines(defines, "opts").ok());
  d->set_value("1\" -I/etc");
  absl::Status s = CheckDefines(defines, "opts");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("opts[0].value"));
  d->set_value("1");
  for (const char* bad : {"__CUDA_ARCH__", "KERNELEVAL_X", "1ROWS", "A-B", ""}) {
    d->set_name(bad);
    s = CheckDefines(defines, "opts");
    EXPECT_THAT(std::string(s.message()), HasSubstr("opts[0].name")) << bad;
  }
}

TEST(Options, OnlyTheServersChoice) {
  google::protobuf::RepeatedPtrField<v1::Define> defines;
  v1::Define* d = defines.Add();
  d->set_name("ROWS");
  const std::vector<std::string> o = NvrtcOptions("sm_100a", true, defines, "/cuda/include");
  EXPECT_EQ(o.front(), "-arch=sm_100a");
  EXPECT_NE(std::find(o.begin(), o.end(), "--use_fast_math"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "-DROWS=1"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "--ptxas-options=-v"), o.end());
}

TEST(Entries, NameExpressionsOnly) {
  EXPECT_TRUE(CheckEntry("ns::kernel<256, 2>", "e").ok());
  EXPECT_FALSE(CheckEntry("k; system(\"x\")", "e").ok());
  EXPECT_FALSE(CheckEntry("", "e").ok());
  EXPECT_FALSE(CheckEntry(std::string(300, 'k'), "e").ok());
}

TEST(PtxasInfo, FiguresPerKernel) {
  const auto figures = ParsePtxasInfo(
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kPf\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'plain' for 'sm_90a'\n"
      "ptxas info    : Function properties for plain\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 0 barriers\n");
  ASSERT_EQ(figures.size(), 2u);
  const v1::KernelResources& k = figures.at("_Z1kPf");
  EXPECT_EQ(k.registers(), 40);
  EXPECT_EQ(k.barriers(), 1);
  EXPECT_EQ(k.static_smem_bytes(), 4096);
  EXPECT_EQ(k.stack_frame_bytes(), 16);
  EXPECT_EQ(k.spill_store_bytes(), 8);
  EXPECT_EQ(k.spill_load_bytes(), 12);
  EXPECT_EQ(figures.at("plain").registers(), 10);
  EXPECT_EQ(figures.at("plain").static_smem_bytes(), 0);
}

v1::LaunchPlan OneKernel(std::uint32_t block, std::uint32_t rows = 1) {
  v1::LaunchPlan plan;
  v1::KernelLaunch* k = plan.add_kernels();
  k->set_entry("k");
  k->set_block_size(block);
  k->set_rows_per_block(rows);
  return plan;
}

std::string PlanError(const v1::LaunchPlan& plan, const std::string& arch = "sm_90a") {
  const DeviceLimits limits = *LimitsForArch(arch, "arch");
  return std::string(ValidateLaunchPlan(plan, limits, "submission.launch_plan").message());
}

TEST(LaunchPlan, BlockSizes) {
  EXPECT_EQ(PlanError(OneKernel(256)), "");
  EXPECT_EQ(PlanError(OneKernel(1024)), "");
  for (std::uint32_t bad : {0u, 16u, 100u, 2048u}) {
    EXPECT_THAT(PlanError(OneKernel(bad)),
                HasSubstr("submission.launch_plan.kernels[0].block_size: " + std::to_string(bad)));
  }
}

TEST(LaunchPlan, KernelsGridsSharedMemoryClusters) {
  v1::LaunchPlan empty;
  EXPECT_THAT(PlanError(empty), HasSubstr("launch_plan.kernels: 0 kernels"));
  v1::LaunchPlan five;
  for (int i = 0; i < 5; ++i) *five.add_kernels() = OneKernel(128).kernels(0);
  EXPECT_THAT(PlanError(five), HasSubstr("5 kernels"));

  v1::LaunchPlan plan = OneKernel(128);
  plan.mutable_kernels(0)->set_rows_per_block(0);
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].rows_per_block"));
  plan.mutable_kernels(0)->clear_grid();
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].grid"));
  plan.mutable_kernels(0)->set_ctas_per_sm(33);
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].ctas_per_sm: 33"));
  plan.mutable_kernels(0)->set_ctas_per_sm(2);
  EXPECT_EQ(PlanError(plan), "");

  plan.mutable_kernels(0)->set_dynamic_smem_bytes(232448);
  EXPECT_EQ(PlanError(plan), "");
  plan.mutable_kernels(0)->set_dynamic_smem_bytes(232449);
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].dynamic_smem_bytes: 232449"));
  plan.mutable_kernels(0)->set_dynamic_smem_bytes(0);

  plan.mutable_kernels(0)->mutable_cluster()->set_x(16);
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].cluster.x: 16"));
  plan.mutable_kernels(0)->mutable_cluster()->set_x(2);
  plan.mutable_kernels(0)->mutable_cluster()->set_y(2);
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].cluster"));
  plan.mutable_kernels(0)->mutable_cluster()->set_y(1);
  EXPECT_EQ(PlanError(plan), "");
  // 132 SMs x 1 CTA is not a whole number of clusters of 8.
  plan.mutable_kernels(0)->set_ctas_per_sm(1);
  plan.mutable_kernels(0)->mutable_cluster()->set_x(8);
  EXPECT_THAT(PlanError(plan), HasSubstr("does not divide the persistent grid of 132"));

  plan = OneKernel(128);
  plan.mutable_kernels(0)->set_entry("bad entry;");
  EXPECT_THAT(PlanError(plan), HasSubstr("kernels[0].entry"));
  EXPECT_THAT(std::string(LimitsForArch("sm_80", "submission.target_arch").status().message()),
              HasSubstr("submission.target_arch: 'sm_80'"));
}

TEST(LaunchPlan, ResourcesAgainstTheDevice) {
  const DeviceLimits limits = *LimitsForArch("sm_90a", "a");
  v1::LaunchPlan plan = OneKernel(1024);
  google::protobuf::RepeatedPtrField<v1::KernelResources> kernels;
  kernels.Add()->set_registers(64);
  EXPECT_TRUE(ValidateResources(plan, kernels, limits, "p").ok());
  kernels[0].set_registers(65);  // rounds to 72 per thread: 73728 > 65536
  EXPECT_THAT(std::string(ValidateResources(plan, kernels, limits, "p").message()),
              HasSubstr("p.kernels[0].block_size: 1024 threads x 65 registers"));
  kernels[0].set_registers(32);
  kernels[0].set_static_smem_bytes(4096);
  plan.mutable_kernels(0)->set_dynamic_smem_bytes(230000);
  EXPECT_THAT(std::string(ValidateResources(plan, kernels, limits, "p").message()),
              HasSubstr("p.kernels[0].dynamic_smem_bytes: 230000 with the kernel's 4096"));
}

TEST(LaunchPlan, GridsFollowTheWorkload) {
  v1::KernelLaunch k = OneKernel(256, 8).kernels(0);
  EXPECT_EQ(*GridFor(k, 79, 132), 10);
  EXPECT_EQ(*GridFor(k, 80, 132), 10);
  EXPECT_EQ(*GridFor(k, 81, 132), 11);
  k.mutable_cluster()->set_x(4);
  EXPECT_EQ(*GridFor(k, 81, 132), 12);
  k.set_ctas_per_sm(2);
  EXPECT_EQ(*GridFor(k, 1, 132), 264);
  EXPECT_FALSE(GridFor(OneKernel(256, 1).kernels(0), 0, 132).ok());
}

TEST(LaunchPlan, DeviceLimitsFromTheDescription) {
  v1::Device d;
  d.set_name("cuda:0");
  d.set_kind("cuda");
  d.set_compute_capability("10.0");
  d.set_sm_count(148);
  EXPECT_EQ(LimitsForDevice(d)->arch, "sm_100a");
  d.set_compute_capability("8.0");
  EXPECT_EQ(LimitsForDevice(d).status().code(), absl::StatusCode::kFailedPrecondition);
  d.set_kind("cpu");
  EXPECT_EQ(LimitsForDevice(d).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CompileCache, KeyCoversSourceOptionsArchAndEntries) {
  internal::CompileRequest a;
  a.set_source("x");
  a.set_arch("sm_90a");
  a.add_entries("k");
  const std::string key = Compiler::CacheKey(a);
  EXPECT_EQ(key, Compiler::CacheKey(a));
  internal::CompileRequest b = a;
  b.set_arch("sm_100a");
  EXPECT_NE(Compiler::CacheKey(b), key);
  b = a;
  b.set_fast_math(true);
  EXPECT_NE(Compiler::CacheKey(b), key);
  b = a;
  b.add_defines()->set_name("X");
  EXPECT_NE(Compiler::CacheKey(b), key);
  b = a;
  b.set_entries(0, "k2");
  EXPECT_NE(Compiler::CacheKey(b), key);
  b = a;
  b.set_source("y");
  EXPECT_NE(Compiler::CacheKey(b), key);
}

internal::StoredSubmission Stored(const std::string& owner, const std::string& id,
                                  const std::string& name) {
  internal::StoredSubmission s;
  s.mutable_submission()->set_owner(owner);
  s.mutable_submission()->set_id(id);
  s.mutable_submission()->mutable_spec()->set_name(name);
  s.mutable_submission()->mutable_spec()->set_source("source of " + name);
  s.set_cubin("cubin of " + name);
  return s;
}

TEST(Registry, OwnersSeeOnlyTheirOwn) {
  auto r = *Registry::Open({});
  EXPECT_TRUE(*r->Add(Stored("alice", "sub-1", "k")));
  EXPECT_TRUE(*r->Add(Stored("bob", "sub-1", "k")));  // same content, another owner
  EXPECT_EQ(r->Find("alice", "k")->cubin(), "cubin of k");
  EXPECT_EQ(r->Find("carol", "sub-1").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(r->Delete("bob", "sub-1").ok());
  EXPECT_TRUE(r->Find("alice", "sub-1").ok());
  EXPECT_EQ(r->Delete("bob", "k").status().code(), absl::StatusCode::kNotFound);
  const absl::StatusOr<SubmissionPage> page = r->List("alice", "", 10, 1 << 20);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->submissions.size(), 1u);
  EXPECT_FALSE(page->more);
  EXPECT_TRUE(page->submissions[0].spec().source().empty());  // lists leave sources out
}

TEST(Registry, NamesContentAndLimits) {
  RegistryOptions o;
  o.max_per_owner = 2;
  o.max_total = 3;
  auto r = *Registry::Open(o);
  EXPECT_TRUE(*r->Add(Stored("a", "sub-1", "k")));
  EXPECT_FALSE(*r->Add(Stored("a", "sub-1", "k")));  // the same again: nothing changes
  EXPECT_THAT(std::string(r->Add(Stored("a", "sub-2", "k")).status().message()),
              HasSubstr("submission.name: 'k' is registered already"));
  EXPECT_EQ(r->Add(Stored("a", "sub-1", "k2")).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(*r->Add(Stored("a", "sub-2", "k2")));
  EXPECT_EQ(r->Add(Stored("a", "sub-3", "k3")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(*r->Add(Stored("b", "sub-3", "k3")));
  EXPECT_THAT(std::string(r->Add(Stored("c", "sub-4", "k4")).status().message()),
              HasSubstr("the server holds 3 submissions"));
}

TEST(Registry, KeptInTheDataDirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("kerneleval-registry-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "-" + std::to_string(getpid()));
  RegistryOptions o;
  o.data_dir = dir.string();
  {
    auto r = *Registry::Open(o);
    ASSERT_TRUE(r->Add(Stored("cert:CN=x/y", "sub-1", "k")).ok());
    ASSERT_TRUE(r->Add(Stored("anonymous", "sub-2", "j")).ok());
    ASSERT_TRUE(r->Delete("anonymous", "j").ok());
  }
  auto reopened = *Registry::Open(o);
  EXPECT_EQ(reopened->size(), 1u);
  EXPECT_EQ(reopened->Find("cert:CN=x/y", "k")->cubin(), "cubin of k");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerneleval::server::submissions
