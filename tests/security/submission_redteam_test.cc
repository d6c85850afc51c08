// The exploits of the compile path, run through a real server on loopback with submissions on,
// the real client and real kerneleval-compile processes (NVRTC needs no GPU), with Landlock
// and as on a kernel without it: each must be refused and nothing of a file the caller does
// not own may come back in any answer.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kerneleval/submission_abi.h"
#include "redteam_servers.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Fixture = SubmissionsServer;

// Each exploit on this kernel (Landlock on) and as a kernel without Landlock: the answers
// must not differ (compile_leak_test.cc compares them).
class RedTeam : public ::testing::TestWithParam<Kernel> {
 protected:
  Fixture Start() const { return StartRedTeamServer(GetParam()); }
};

TEST_P(RedTeam, RawStringHidesAnIncludeFromTheLexerButNotFromTheJail) {
  const Fixture f = Start();
  const PlantedFile planted;
  // In C++ the raw string ends at )x" and the #include is a directive; a lexer that knows
  // no raw strings sees a comment from /* to */ around it.
  const std::string prelude =
      "const char* s = R\"x(\n/*)x\";\n#include \"" + planted.path.string() + "\"\n// */\n";
  const Answer a = Register(f, Spec("rawstring", prelude));
  EXPECT_FALSE(a.status.ok());
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << a.Text();
  EXPECT_THAT(a.Text(), Not(HasSubstr(planted.marker)));
  EXPECT_THAT(a.Text(), Not(HasSubstr("PLANTED_SECRET")));
  // Nor does the answer say that the file exists: a missing file of a name as long gets the
  // same message, the name aside.
  const std::string missing = (planted.dir / "absent.h").string();
  ASSERT_EQ(missing.size(), planted.path.string().size());
  const Answer b = Register(f, Spec("rawstring", "const char* s = R\"x(\n/*)x\";\n#include \"" +
                                                     missing + "\"\n// */\n"));
  std::string expected = a.status.error_message();
  expected.replace(expected.find(planted.path.string()), missing.size(), missing);
  expected.replace(expected.find(planted.path.string()), missing.size(), missing);
  EXPECT_EQ(b.status.error_message(), expected);
}

TEST_P(RedTeam, HasIncludeAnswersTheSameForAnExistingAndAMissingPath) {
  const Fixture f = Start();
  const PlantedFile planted;
  // The answer shows as the compile's outcome: "found" is an #error. Were the filesystem
  // visible, the planted file and /etc/hostname would fail to compile and the missing file
  // would not: one bit per probe about any path of the server's machine.
  auto probe = [&](const std::string& name, const std::string& path) {
    return Register(
        f, Spec(name, "#if __has_include(\"" + path + "\")\n#error the path exists\n#endif\n"));
  };
  int n = 0;
  for (const std::string& path :
       {planted.path.string(), (planted.dir / "no_such_file.h").string(),
        std::string("/etc/hostname"), std::string("/etc/passwd"), std::string("/proc/self/environ"),
        std::string("/usr/local/cuda/include/cuda_runtime.h")}) {
    const Answer a = probe("probe" + std::to_string(n++), path);
    EXPECT_TRUE(a.status.ok()) << path << ": " << a.status.error_message();
    EXPECT_THAT(a.response.submission().diagnostics().log(), Not(HasSubstr("#error"))) << path;
  }
}

TEST_P(RedTeam, AbsoluteIncludeIsRefusedWithoutTheFilesText) {
  const Fixture f = Start();
  std::ifstream passwd("/etc/passwd");
  std::string first_line;
  std::getline(passwd, first_line);
  ASSERT_FALSE(first_line.empty());
  for (const std::string include :
       {"\"/etc/passwd\"", "</etc/passwd>", "\"../../../etc/passwd\""}) {
    const Answer a = Register(f, Spec("abs", "#include " + include + "\n"));
    EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << include;
    EXPECT_THAT(a.Text(), Not(HasSubstr(first_line))) << include;
    EXPECT_THAT(a.Text(), Not(HasSubstr("root:"))) << include;
  }
}

TEST_P(RedTeam, EveryAllowedHeaderStillCompilesInsideTheJail) {
  // The jail is no refusal of everything: each header of the allow-list, and what it
  // includes, comes from memory.
  const Fixture f = Start();
  int n = 0;
  for (const char* header :
       {"cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "cuda_pipeline.h", "cuda_awbarrier.h",
        "cooperative_groups.h", "cooperative_groups/reduce.h", "mma.h", "cuda/barrier",
        "cuda/pipeline", "cuda/ptx", "cuda/atomic", "cuda/annotated_ptr", "cuda/cmath",
        "cuda/std/cstdint", "cuda/std/type_traits"}) {
    const Answer a = Register(
        f, Spec("header" + std::to_string(n++), std::string("#include <") + header + ">\n"));
    EXPECT_TRUE(a.status.ok()) << header << ": " << a.status.error_message();
  }
}

TEST_P(RedTeam, HugeDeviceArrayIsRefusedAtRegistration) {
  const Fixture f = Start();
  const Answer a = Register(
      f, Spec("huge", "__device__ char big[100ull << 30];\n", "static_cast<float>(big[p.batch])"));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << a.Text();
  EXPECT_THAT(a.status.error_message(), HasSubstr("submission.source"));
  EXPECT_THAT(a.status.error_message(), HasSubstr("--max-submission-static-bytes"));
  // The same source under a limit it fits: the refusal is the limit, not the source.
  const Answer small = Register(
      f, Spec("small", "__device__ char big[1 << 20];\n", "static_cast<float>(big[p.batch])"));
  EXPECT_TRUE(small.status.ok()) << small.Text();
}

TEST_P(RedTeam, OversizedCubinIsRefusedAtRegistration) {
  // An initialized 8 MiB array is 8 MiB of cubin (and 8 MiB of static memory, under 256).
  const std::string prelude = "__device__ char blob[8 << 20] = {1};\n";
  const std::string value = "static_cast<float>(blob[p.batch])";
  {
    const Fixture f = Start();
    const Answer a = Register(f, Spec("blob", prelude, value));
    EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << a.Text();
    EXPECT_THAT(a.status.error_message(), HasSubstr("--max-submission-cubin-bytes"));
    EXPECT_THAT(a.status.error_message(), HasSubstr("submission.source"));
  }
  server::ServerOptions roomy = RedTeamOptions(GetParam());
  roomy.submissions.compiler.module_limits.max_cubin_bytes = 16 << 20;
  const Fixture f = StartSubmissionsServer(roomy);
  const Answer a = Register(f, Spec("blob", prelude, value));
  EXPECT_TRUE(a.status.ok()) << a.Text();
  EXPECT_GT(a.response.submission().diagnostics().cubin_bytes(), 8u << 20);
}

INSTANTIATE_TEST_SUITE_P(Kernels, RedTeam,
                         ::testing::Values(Kernel::kAsItIs, Kernel::kWithoutLandlock), KernelName);

// PTX of one entry `k` with `params` and `body`, after the module's `prelude`.
v1::SubmissionSpec PtxSpec(const std::string& name, const std::string& prelude,
                           const std::string& params, const std::string& body) {
  v1::SubmissionSpec spec =
      OneKernelSpec(name,
                    ".version 8.0\n.target sm_90a\n.address_size 64\n" + prelude +
                        ".visible .entry k(" + params + ")\n{\n" + body + "  ret;\n}\n",
                    "k", v1::DTYPE_FP32, 32);
  spec.set_language(v1::SOURCE_LANGUAGE_PTX);
  return spec;
}

const std::string kAbiParam =
    ".param .align 8 .b8 k_param_0[" + std::to_string(KERNELEVAL_PARAMS_BYTES) + "]";

TEST(RedTeam, AnEntryWrittenInAPtxCommentIsNotTheEntry) {
  const Fixture f = StartSubmissionsServer();
  // The ABI's parameter list in comments; the entry the assembler builds takes two pointers,
  // which the launcher would fill from the one parameter block.
  const std::string fake = "// .visible .entry k(" + kAbiParam + ")\n/* .visible .entry k(" +
                           kAbiParam + ") { ret; } */\n";
  const Answer a =
      Register(f, PtxSpec("fake_entry", fake, ".param .u64 k_param_0, .param .u64 k_param_1", ""));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << a.Text();
  EXPECT_THAT(a.status.error_message(), HasSubstr("kernels[0].entry: 'k' takes 2 parameter(s)"));
  // The same comments before the real ABI entry change nothing.
  const Answer real = Register(f, PtxSpec("real_entry", fake, kAbiParam, ""));
  EXPECT_TRUE(real.status.ok()) << real.Text();
}

TEST(RedTeam, APdlWaitMustBeReachableFromTheEntry) {
  const Fixture f = StartSubmissionsServer();
  const std::string waiter = ".func waiter()\n{\n  griddepcontrol.wait;\n  ret;\n}\n";
  // The waiter's address is taken, and named in the entry, but nothing calls it.
  const std::string named_not_called =
      "  .reg .b64 %rd<2>;\n  mov.u64 %rd1, waiter;\n  // call.uni waiter, ();\n";
  v1::SubmissionSpec spec = PtxSpec("uncalled", waiter, kAbiParam, named_not_called);
  spec.mutable_launch_plan()->mutable_kernels(0)->set_pdl(true);
  const Answer refused = Register(f, spec);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.Text();
  EXPECT_THAT(refused.status.error_message(), HasSubstr("submission.launch_plan.kernels[0].pdl"));
  // Called: the same module waits, and the plan is taken.
  spec = PtxSpec("called", waiter, kAbiParam, "  call.uni waiter, ();\n");
  spec.mutable_launch_plan()->mutable_kernels(0)->set_pdl(true);
  const Answer taken = Register(f, spec);
  ASSERT_TRUE(taken.status.ok()) << taken.Text();
  EXPECT_TRUE(taken.response.submission().diagnostics().kernels(0).waits_for_grid_dependency());
}

}  // namespace
}  // namespace kerneleval::testing
