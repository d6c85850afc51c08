// The Submissions service through a real server on loopback and the real client, compiling
// in real kerneleval-compile processes (NVRTC runs without a GPU): the examples compile with
// their resource figures, and every bad submission gets its code with the field named.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/cli.h"
#include "client/submit_client.h"
#include "server/submissions/registry.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(KERNELEVAL_TEST_EXAMPLES_DIR) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

using Fixture = SubmissionsServer;

// A plan of one kernel, `block` threads, one row per CTA.
v1::SubmissionSpec Spec(const std::string& name, const std::string& source,
                        const std::string& entry, std::uint32_t block = 256,
                        std::uint32_t rows_per_block = 1) {
  return OneKernelSpec(name, source, entry, v1::DTYPE_BF16, block, rows_per_block);
}

constexpr char kTiny[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";

grpc::Status Register(const Fixture& f, const v1::SubmissionSpec& spec,
                      v1::RegisterSubmissionResponse* response = nullptr) {
  v1::RegisterSubmissionResponse ignored;
  return f.submissions->Register(spec, response != nullptr ? response : &ignored);
}

TEST(Submissions, ExamplesCompileWithTheirResources) {
  const Fixture f = StartSubmissionsServer();
  struct Example {
    const char* file;
    const char* entry;
    std::uint32_t block, rows;
    bool waits;  // executes griddepcontrol.wait: registered with pdl
  };
  for (const Example& e : {Example{"naive_block_per_row.cu", "naive_block_per_row", 256, 1, false},
                           Example{"warp_per_row_vec.cu", "warp_per_row_vec", 256, 8, false},
                           Example{"fused_rows_vec16.cu", "fused_rows_vec16<0>", 128, 1, true}}) {
    v1::SubmissionSpec spec =
        Spec(std::string(e.file).substr(0, 12), ReadExample(e.file), e.entry, e.block, e.rows);
    spec.mutable_launch_plan()->mutable_kernels(0)->set_pdl(e.waits);
    v1::RegisterSubmissionResponse r;
    const grpc::Status s = Register(f, spec, &r);
    ASSERT_TRUE(s.ok()) << e.file << ": " << s.error_message();
    EXPECT_TRUE(r.created());
    const v1::Submission& sub = r.submission();
    EXPECT_THAT(sub.id(), ::testing::StartsWith("sub-"));
    EXPECT_EQ(sub.id().size(), 28u);
    EXPECT_EQ(sub.owner(), "anonymous");
    EXPECT_EQ(sub.spec().target_arch(), "sm_90a");  // no GPU here: the Hopper default
    EXPECT_EQ(sub.spec().mode(), v1::MODE_OUTPUT);
    ASSERT_EQ(sub.diagnostics().kernels_size(), 1);
    const v1::KernelResources& k = sub.diagnostics().kernels(0);
    EXPECT_EQ(k.entry(), e.entry);
    EXPECT_EQ(k.waits_for_grid_dependency(), e.waits) << e.file;
    EXPECT_GT(k.registers(), 8) << e.file;
    EXPECT_LE(k.registers(), 64) << e.file;
    EXPECT_EQ(k.spill_store_bytes(), 0) << e.file;
    EXPECT_GT(sub.diagnostics().cubin_bytes(), 1000u);
    EXPECT_THAT(sub.diagnostics().log(), HasSubstr("ptxas info"));
    EXPECT_FALSE(sub.diagnostics().cache_hit());
  }
  // The naive kernel's reduction buffer is static shared memory, and it says so.
  v1::GetSubmissionResponse naive;
  ASSERT_TRUE(f.submissions->Get("naive_block_", &naive).ok());
  EXPECT_EQ(naive.submission().diagnostics().kernels(0).static_smem_bytes(), 4096);
  EXPECT_EQ(naive.submission().spec().source(), ReadExample("naive_block_per_row.cu"));
  v1::GetSubmissionResponse by_id;
  ASSERT_TRUE(f.submissions->Get(naive.submission().id(), &by_id).ok());
  EXPECT_EQ(by_id.submission().spec().name(), "naive_block_");
  v1::ListSubmissionsResponse list;
  ASSERT_TRUE(f.submissions->List(&list).ok());
  ASSERT_EQ(list.submissions_size(), 3);
  EXPECT_TRUE(list.submissions(0).spec().source().empty());
}

TEST(Submissions, RegisteringAgainIsIdempotentAndCached) {
  const Fixture f = StartSubmissionsServer();
  v1::RegisterSubmissionResponse first, again;
  ASSERT_TRUE(Register(f, Spec("tiny", kTiny, "tiny"), &first).ok());
  ASSERT_TRUE(Register(f, Spec("tiny", kTiny, "tiny"), &again).ok());
  EXPECT_FALSE(again.created());
  EXPECT_TRUE(again.submission().diagnostics().cache_hit());
  EXPECT_EQ(again.submission().id(), first.submission().id());
  // Another block size is other content: another id, from the same cached cubin.
  v1::RegisterSubmissionResponse other;
  ASSERT_TRUE(Register(f, Spec("tiny128", kTiny, "tiny", 128), &other).ok());
  EXPECT_NE(other.submission().id(), first.submission().id());
  EXPECT_TRUE(other.submission().diagnostics().cache_hit());
}

TEST(Submissions, CompileErrorsCarryTheLogWithLineNumbers) {
  const Fixture f = StartSubmissionsServer();
  const std::string source =
      "#include <kerneleval/submission_abi.h>\n"
      "extern \"C\" __global__ void k(const kerneleval_params p) {\n"
      "  int x = undeclared_name;\n"
      "}\n";
  const grpc::Status s = Register(f, Spec("broken", source, "k"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.source: compilation failed"));
  EXPECT_THAT(s.error_message(), HasSubstr("submission.cu(3): error"));
  EXPECT_THAT(s.error_message(), HasSubstr("undeclared_name"));
}

// A CUDA kernel that takes plain pointers and sizes, as `kerneleval submit --arg` binds them
// (the CLI's own spec builder): registered, with the sizes the server read from its PTX.
constexpr char kPlainParams[] =
    "#include <cuda_bf16.h>\n"
    "extern \"C\" __global__ void plain(const __nv_bfloat16* x, const __nv_bfloat16* r,\n"
    "    const __nv_bfloat16* w, __nv_bfloat16* out, long long n_rows, int n_cols, float eps) {\n"
    "  const long long row = blockIdx.x;\n"
    "  if (row >= n_rows) return;\n"
    "  float ss = 0.f;\n"
    "  for (int i = threadIdx.x; i < n_cols; i += blockDim.x) {\n"
    "    const float s = __bfloat162float(x[row * n_cols + i]) + __bfloat162float(r[row * n_cols + "
    "i]);\n"
    "    ss += s * s;\n"
    "  }\n"
    "  out[row * n_cols + threadIdx.x] = __float2bfloat16(ss * eps * __bfloat162float(w[0]));\n"
    "}\n";

absl::StatusOr<v1::SubmissionSpec> CliSpec(const std::string& name,
                                           const std::vector<std::string>& args) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kerneleval-plain-" + name + ".cu");
  std::ofstream(path) << kPlainParams;
  client::SubmitSpec flags;
  flags.source_path = path.string();
  flags.name = name;
  flags.entries = {"plain"};
  flags.block_sizes = {256};
  flags.rows_per_block = {1};
  flags.args = args;
  absl::StatusOr<v1::SubmissionSpec> spec = client::BuildSubmissionSpec(flags);
  std::filesystem::remove(path);
  return spec;
}

TEST(Submissions, KernelsWithTheirOwnParameters) {
  const Fixture f = StartSubmissionsServer();
  absl::StatusOr<v1::SubmissionSpec> spec =
      CliSpec("plain", {"x=hidden_states", "r=residual", "w=weight", "out=output", "n_rows=batch",
                        "n_cols=hidden", "eps=eps"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::RegisterSubmissionResponse r;
  grpc::Status s = Register(f, *spec, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::KernelResources& k = r.submission().diagnostics().kernels(0);
  EXPECT_THAT(std::vector<long long>(k.param_bytes().begin(), k.param_bytes().end()),
              ::testing::ElementsAre(8, 8, 8, 8, 8, 4, 4));
  EXPECT_EQ(r.submission().spec().launch_plan().kernels(0).params(4).source(),
            v1::PARAM_SOURCE_BATCH);
  EXPECT_THAT(client::FormatSubmission(r.submission(), false),
              HasSubstr("plain takes x=hidden_states, r=residual, w=weight, out=output, "
                        "n_rows=batch, n_cols=hidden, eps=eps"));

  // One parameter short: both counts named.
  spec = CliSpec("short", {"x=hidden_states", "r=residual", "w=weight", "out=output",
                           "n_rows=batch", "n_cols=hidden"});
  ASSERT_TRUE(spec.ok());
  s = Register(f, *spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr("submission.launch_plan.kernels[0].params: 6 bound; 'plain' takes 7"));
  // eps (a 4-byte float) bound to a pointer.
  spec = CliSpec("ptr", {"x=hidden_states", "r=residual", "w=weight", "out=output", "n_rows=batch",
                         "n_cols=hidden", "eps=null"});
  ASSERT_TRUE(spec.ok());
  s = Register(f, *spec);
  EXPECT_THAT(s.error_message(), HasSubstr("params[6] ('eps'): bound to null (a pointer, 8 bytes)"
                                           ", but the entry's parameter 6 has 4 bytes"));
  // A value the service does not supply is refused by the CLI before any call.
  spec = CliSpec("bad", {"x=hidden_state"});
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("--arg 'x=hidden_state': unknown value"));
}

// A kernel that takes each tensor as a struct by value, as CuTe DSL passes a tensor of
// dynamic (batch, hidden) layout: its pointer, i32 rows, i32 columns, i64 row stride.
constexpr char kStructParams[] =
    "#include <cuda_bf16.h>\n"
    "struct view { __nv_bfloat16* p; int rows; int cols; long long stride; };\n"
    "extern \"C\" __global__ void tensors(view x, view out, float eps) {\n"
    "  const int row = blockIdx.x;\n"
    "  if (row >= x.rows) return;\n"
    "  out.p[row * out.stride + threadIdx.x] = __float2bfloat16(\n"
    "      __bfloat162float(x.p[row * x.stride + threadIdx.x]) * eps * x.cols);\n"
    "}\n";

TEST(Submissions, TensorsPassedAsStructs) {
  const Fixture f = StartSubmissionsServer();
  const auto spec_of = [](const std::string& name, const std::vector<std::string>& args) {
    absl::StatusOr<v1::SubmissionSpec> spec = CliSpec(name, args);
    if (spec.ok()) {
      spec->set_source(kStructParams);
      spec->mutable_launch_plan()->mutable_kernels(0)->set_entry("tensors");
    }
    return spec;
  };
  absl::StatusOr<v1::SubmissionSpec> spec =
      spec_of("views", {"x=struct(hidden_states, batch:i32, hidden:i32, hidden_states_stride:i64)",
                        "out=struct(output, batch:i32, hidden:i32, output_stride:i64)", "eps=eps"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::RegisterSubmissionResponse r;
  grpc::Status s = Register(f, *spec, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::KernelResources& k = r.submission().diagnostics().kernels(0);
  EXPECT_THAT(std::vector<long long>(k.param_bytes().begin(), k.param_bytes().end()),
              ::testing::ElementsAre(24, 24, 4));
  EXPECT_THAT(client::FormatSubmission(r.submission(), false),
              HasSubstr("tensors takes x=struct(hidden_states, batch:i32, hidden:i32, "
                        "hidden_states_stride:i64), out=struct(output, batch:i32, hidden:i32, "
                        "output_stride:i64), eps=eps"));

  // The row stride left out: a 16-byte struct against the kernel's 24 bytes, both named.
  spec =
      spec_of("short", {"x=struct(hidden_states, batch:i32, hidden:i32)",
                        "out=struct(output, batch:i32, hidden:i32, output_stride:i64)", "eps=eps"});
  ASSERT_TRUE(spec.ok());
  s = Register(f, *spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr("params[0] ('x'): bound to struct (a struct of 3 field(s), 16 bytes), "
                        "but the entry's parameter 0 has 24 bytes"));
  // A field without its size, and a scratch field, are refused by name.
  spec = spec_of("nosize",
                 {"x=struct(hidden_states, batch, hidden:i32, hidden_states_stride:i64)",
                  "out=struct(output, batch:i32, hidden:i32, output_stride:i64)", "eps=eps"});
  ASSERT_TRUE(spec.ok());
  s = Register(f, *spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("params[0] ('x').fields[1].bytes: 0; batch takes 4"));
  EXPECT_THAT(spec_of("scratch", {"x=struct(scratch:64)"}).status().message(),
              HasSubstr("scratch cannot be a struct's field"));
  EXPECT_THAT(spec_of("bare", {"x=struct"}).status().message(),
              HasSubstr("a struct lists its fields"));
}

TEST(Submissions, KernelsMustTakeTheAbi) {
  const Fixture f = StartSubmissionsServer();
  const std::string wrong = "extern \"C\" __global__ void k(float* out, int n) { out[n] = 1.f; }\n";
  grpc::Status s = Register(f, Spec("wrong", wrong, "k"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr("submission.launch_plan.kernels[0].entry: 'k' takes 2 parameter(s)"));
  s = Register(f, Spec("absent", kTiny, "not_there"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("not_there"));
}

TEST(Submissions, EmptyAndHugeSources) {
  const Fixture f = StartSubmissionsServer();
  grpc::Status s = Register(f, Spec("empty", "", "k"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.source: empty"));
  s = Register(f, Spec("huge", std::string(300000, ' ') + kTiny, "tiny"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.source: 300"));
  EXPECT_THAT(s.error_message(), HasSubstr("at most 262144"));
}

TEST(Submissions, ForbiddenIncludesNameTheLine) {
  const Fixture f = StartSubmissionsServer();
  for (const char* include :
       {"#include <stdio.h>", "#include \"/etc/passwd\"", "#include \"../server/app/server.h\""}) {
    const grpc::Status s =
        Register(f, Spec("inc", std::string("\n") + include + "\n" + kTiny, "tiny"));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << include;
    EXPECT_THAT(s.error_message(), HasSubstr("submission.source: line 2: #include")) << include;
  }
}

TEST(Submissions, OptionsAreWhitelisted) {
  const Fixture f = StartSubmissionsServer();
  v1::SubmissionSpec spec = Spec("opts", kTiny, "tiny");
  v1::Define* d = spec.mutable_options()->add_defines();
  d->set_name("X");
  d->set_value("1\" -I/etc");
  grpc::Status s = Register(f, spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.options.defines[0].value"));
  d->set_name("--use_fast_math");
  d->set_value("");
  s = Register(f, spec);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.options.defines[0].name"));
  spec.set_target_arch("sm_80");
  spec.mutable_options()->clear_defines();
  s = Register(f, spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.target_arch: 'sm_80'"));
  // Allowed defines and fast math reach the compiler.
  spec = Spec("opts", "#if WIDTH != 4\n#error WIDTH\n#endif\n" + std::string(kTiny), "tiny");
  d = spec.mutable_options()->add_defines();
  d->set_name("WIDTH");
  d->set_value("4");
  spec.mutable_options()->set_fast_math(true);
  v1::RegisterSubmissionResponse r;
  s = Register(f, spec, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(r.submission().diagnostics().options(), ::testing::Contains("--use_fast_math"));
  EXPECT_THAT(r.submission().diagnostics().options(), ::testing::Contains("-DWIDTH=4"));
}

TEST(Submissions, BadLaunchPlansNameTheField) {
  const Fixture f = StartSubmissionsServer();
  for (std::uint32_t block : {0u, 2048u, 100u}) {
    const grpc::Status s = Register(f, Spec("plan", kTiny, "tiny", block));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << block;
    EXPECT_THAT(s.error_message(), HasSubstr("submission.launch_plan.kernels[0].block_size: " +
                                             std::to_string(block)));
  }
  v1::SubmissionSpec spec = Spec("plan", kTiny, "tiny");
  spec.mutable_launch_plan()->mutable_kernels(0)->set_dynamic_smem_bytes(300000);
  grpc::Status s = Register(f, spec);
  EXPECT_THAT(s.error_message(),
              HasSubstr("submission.launch_plan.kernels[0].dynamic_smem_bytes: 300000"));
  // Within the limit alone, over it with the naive kernel's 4 KiB of static shared memory:
  // caught once the compiler has said how much the kernel declares.
  spec = Spec("plan", ReadExample("naive_block_per_row.cu"), "naive_block_per_row");
  spec.mutable_launch_plan()->mutable_kernels(0)->set_dynamic_smem_bytes(230000);
  s = Register(f, spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("with the kernel's 4096 static bytes"));
  spec = Spec("plan", kTiny, "tiny");
  spec.mutable_launch_plan()->clear_kernels();
  s = Register(f, spec);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.launch_plan.kernels: 0 kernels"));
  spec = Spec("plan", kTiny, "tiny");
  spec.set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_THAT(Register(f, spec).error_message(), HasSubstr("submission.dtype"));
}

// A kernel launched with pdl may start before its predecessor ends; one that never executes
// griddepcontrol.wait would overlap the calls of a graph replay and be timed as if they ran
// one after another. Refused at registration, however the wait is hidden.
TEST(Submissions, PdlKernelsMustWaitForTheirPredecessor) {
  const Fixture f = StartSubmissionsServer();
  const std::string source =
      "#include <kerneleval/submission_abi.h>\n"
      "__device__ __noinline__ void Wait() { asm volatile(\"griddepcontrol.wait;\" ::: "
      "\"memory\"); }\n"
      "extern \"C\" __global__ void waits_in_callee(const kerneleval_params p) {\n"
      "  Wait();\n"
      "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
      "}\n"
      "__device__ __noinline__ void Unused() { asm volatile(\"griddepcontrol.wait;\"); }\n"
      "extern \"C\" __global__ void never_waits(const kerneleval_params p) {\n"
      "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
      "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
      "}\n";
  v1::SubmissionSpec waits = Spec("waits", source, "waits_in_callee");
  waits.mutable_launch_plan()->mutable_kernels(0)->set_pdl(true);
  v1::RegisterSubmissionResponse r;
  const grpc::Status ok = Register(f, waits, &r);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_TRUE(r.submission().diagnostics().kernels(0).waits_for_grid_dependency());

  v1::SubmissionSpec never = Spec("never", source, "never_waits");
  never.mutable_launch_plan()->mutable_kernels(0)->set_pdl(true);
  grpc::Status refused = Register(f, never);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("submission.launch_plan.kernels[0].pdl"));
  EXPECT_THAT(refused.error_message(), HasSubstr("never executes griddepcontrol.wait"));
  // Without pdl it runs in stream order, and nothing needs a wait.
  never.mutable_launch_plan()->mutable_kernels(0)->set_pdl(false);
  EXPECT_TRUE(Register(f, never).ok());

  // PTX whose only wait is in a comment, or in a function the entry never names.
  v1::SubmissionSpec ptx = Spec(
      "ptx_wait",
      absl::StrCat(".version 8.0\n.target sm_90a\n.address_size 64\n"
                   ".func unused()\n{\n  griddepcontrol.wait;\n  ret;\n}\n"
                   ".visible .entry nothing(\n"
                   "  .param .align 8 .b8 nothing_param_0[144]\n)\n{\n  // griddepcontrol.wait;\n"
                   "  /* griddepcontrol.wait; */\n  ret;\n}\n"),
      "nothing");
  ptx.set_language(v1::SOURCE_LANGUAGE_PTX);
  ptx.mutable_launch_plan()->mutable_kernels(0)->set_pdl(true);
  refused = Register(f, ptx);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("kernels[0].pdl"));
}

TEST(Submissions, UnknownIdsAreNotFound) {
  const Fixture f = StartSubmissionsServer();
  v1::GetSubmissionResponse got;
  grpc::Status s = f.submissions->Get("sub-000000000000000000000000", &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("'sub-000000000000000000000000'"));
  v1::DeleteSubmissionResponse deleted;
  EXPECT_EQ(f.submissions->Delete("nothing", &deleted).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::RegisterSubmissionResponse r;
  ASSERT_TRUE(Register(f, Spec("tiny", kTiny, "tiny"), &r).ok());
  ASSERT_TRUE(f.submissions->Delete("tiny", &deleted).ok());
  EXPECT_EQ(deleted.id(), r.submission().id());
  EXPECT_EQ(f.submissions->Get(r.submission().id(), &got).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST(Submissions, DuplicateNamesAreRefused) {
  const Fixture f = StartSubmissionsServer();
  ASSERT_TRUE(Register(f, Spec("mine", kTiny, "tiny")).ok());
  const grpc::Status s =
      Register(f, Spec("mine", ReadExample("naive_block_per_row.cu"), "naive_block_per_row"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.name: 'mine'"));
}

TEST(Submissions, EchoedValuesAreBounded) {
  const Fixture f = StartSubmissionsServer();
  const grpc::Status s = Register(f, Spec(std::string(10000, 'n'), kTiny, "tiny"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("submission.name"));
  EXPECT_THAT(s.error_message(), HasSubstr("(10000 bytes)"));
  EXPECT_LT(s.error_message().size(), 200u);
}

TEST(Submissions, OffUnlessTheServerSaysSo) {
  server::ServerOptions o = SubmissionOptions();
  o.submissions.enabled = false;
  const Fixture f = StartSubmissionsServer(o);
  grpc::Status s = Register(f, Spec("tiny", kTiny, "tiny"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--submissions"));
  v1::ListSubmissionsResponse list;
  EXPECT_EQ(f.submissions->List(&list).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(Submissions, BehindTheToken) {
  server::ServerOptions o = SubmissionOptions();
  o.auth_token = "s3cret";
  client::ClientOptions with_token;
  with_token.bearer_token = "s3cret";
  const Fixture f = StartSubmissionsServer(o, with_token);
  v1::RegisterSubmissionResponse r;
  ASSERT_TRUE(Register(f, Spec("tiny", kTiny, "tiny"), &r).ok());
  EXPECT_EQ(r.submission().owner(), "token");
  client::ClientOptions none;
  none.target = f.server.target();
  std::shared_ptr<grpc::Channel> channel;
  ASSERT_TRUE(client::MakeChannel(none, &channel).ok());
  const client::SubmissionsClient anonymous(channel, none);
  v1::ListSubmissionsResponse list;
  EXPECT_EQ(anonymous.List(&list).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST(Submissions, CompileTimeIsBounded) {
  server::ServerOptions o = SubmissionOptions();
  o.submissions.compiler.cpu_seconds = 2;
  o.submissions.compiler.wall_seconds = 6;
  const Fixture f = StartSubmissionsServer(o);
  // Three instantiations per level, memoized by nothing: exponential work for the front end.
  const std::string spin =
      "#include <kerneleval/submission_abi.h>\n"
      "template <int N, int M> struct A {\n"
      "  static constexpr long v = A<N - 1, M>::v + A<N - 1, M + 1>::v + A<N - 2, M * 3>::v;\n"
      "};\n"
      "template <int M> struct A<0, M> { static constexpr long v = M; };\n"
      "template <int M> struct A<-1, M> { static constexpr long v = 1; };\n"
      "extern \"C\" __global__ void spin(const kerneleval_params p) {\n"
      "  static_cast<long*>(p.output)[0] = A<60, 0>::v;\n"
      "}\n";
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status s = Register(f, Spec("spin", spin, "spin"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("submission.source: compilation"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // The server goes on compiling.
  EXPECT_TRUE(Register(f, Spec("tiny", kTiny, "tiny")).ok());
}

TEST(Submissions, PtxIsAssembled) {
  const Fixture f = StartSubmissionsServer();
  v1::SubmissionSpec spec = Spec("ptx",
                                 ".version 8.0\n.target sm_90a\n.address_size 64\n"
                                 ".visible .entry nothing(\n"
                                 "  .param .align 8 .b8 nothing_param_0[144]\n)\n{\n  ret;\n}\n",
                                 "nothing");
  spec.set_language(v1::SOURCE_LANGUAGE_PTX);
  v1::RegisterSubmissionResponse r;
  const grpc::Status s = Register(f, spec, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.submission().diagnostics().kernels(0).lowered_name(), "nothing");
  // Written against ABI version 1 (a 128-byte block laid out otherwise) or 2 (136 bytes):
  // refused, saying which.
  for (const auto& [bytes, version] : {std::pair{128, 1}, std::pair{136, 2}}) {
    v1::SubmissionSpec old = spec;
    old.set_name(absl::StrCat("ptx_v", version));
    old.set_source(
        absl::StrCat(".version 8.0\n.target sm_90a\n.address_size 64\n"
                     ".visible .entry nothing(\n"
                     "  .param .align 8 .b8 nothing_param_0[",
                     bytes, "]\n)\n{\n  ret;\n}\n"));
    const grpc::Status refused = Register(f, old);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << version;
    EXPECT_THAT(refused.error_message(), HasSubstr(absl::StrCat("ABI version ", version, ";")));
    EXPECT_THAT(refused.error_message(), HasSubstr("kernels[0].entry"));
  }
  spec.set_source(".version 8.0\n.target sm_90a\nthis is not ptx\n");
  EXPECT_EQ(Register(f, spec).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(Submissions, KeptAcrossRestartsInTheDataDirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kerneleval-subs-" + std::to_string(getpid()));
  server::ServerOptions o = SubmissionOptions();
  o.submissions.data_dir = dir.string();
  std::string id;
  {
    const Fixture f = StartSubmissionsServer(o);
    v1::RegisterSubmissionResponse r;
    ASSERT_TRUE(Register(f, Spec("kept", kTiny, "tiny"), &r).ok());
    id = r.submission().id();
  }
  const Fixture f = StartSubmissionsServer(o);
  v1::GetSubmissionResponse got;
  ASSERT_TRUE(f.submissions->Get("kept", &got).ok());
  EXPECT_EQ(got.submission().id(), id);
  std::filesystem::remove_all(dir);
}

// A submission an older release kept as a file in the data directory moves into the SQLite
// database there at start: found through the server, its file renamed *.pb.imported, and
// still found after the next restart, which reads no file.
TEST(Submissions, FilesOfAnOlderReleaseMoveIntoTheDatabase) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kerneleval-import-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::string id;
  {
    // Registered as a release without the table kept it: a file per submission.
    server::ServerOptions files = SubmissionOptions();
    const Fixture f = StartSubmissionsServer(files);
    v1::RegisterSubmissionResponse r;
    ASSERT_TRUE(Register(f, Spec("legacy", kTiny, "tiny"), &r).ok());
    id = r.submission().id();
    v1::GetSubmissionResponse got;
    ASSERT_TRUE(f.submissions->Get("legacy", &got).ok());
    server::submissions::RegistryOptions options;
    options.data_dir = dir.string();
    auto registry = server::submissions::Registry::Open(options);
    ASSERT_TRUE(registry.ok()) << registry.status();
    internal::StoredSubmission stored;
    *stored.mutable_submission() = got.submission();
    ASSERT_TRUE((*registry)->Add(stored).ok());
  }
  auto files_ending = [&](const std::string& suffix) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir / "submissions")) {
      const std::string name = e.path().filename().string();
      n += name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    }
    return n;
  };
  ASSERT_EQ(files_ending(".pb"), 1);
  server::ServerOptions o = SubmissionOptions();
  o.submissions.data_dir = dir.string();
  for (int start = 0; start < 2; ++start) {
    SCOPED_TRACE(start);
    const Fixture f = StartSubmissionsServer(o);
    v1::GetSubmissionResponse got;
    ASSERT_TRUE(f.submissions->Get("legacy", &got).ok());
    EXPECT_EQ(got.submission().id(), id);
    EXPECT_EQ(files_ending(".pb"), 0);
    EXPECT_EQ(files_ending(".pb.imported"), 1);
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "results.sqlite3"));
  std::filesystem::remove_all(dir);
}

TEST(Submissions, LimitsPerOwner) {
  server::ServerOptions o = SubmissionOptions();
  o.submissions.max_per_owner = 1;
  const Fixture f = StartSubmissionsServer(o);
  ASSERT_TRUE(Register(f, Spec("one", kTiny, "tiny")).ok());
  const grpc::Status s = Register(f, Spec("two", kTiny, "tiny", 128));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// The owner's quota is checked before its source is compiled: a source that does not even
// compile is refused for the quota, not for its errors, and the compile never ran.
TEST(Submissions, OwnerQuotaIsCheckedBeforeCompiling) {
  server::ServerOptions o = SubmissionOptions();
  o.submissions.max_per_owner = 1;
  const Fixture f = StartSubmissionsServer(o);
  ASSERT_TRUE(Register(f, Spec("one", kTiny, "tiny")).ok());
  const grpc::Status s = Register(f, Spec("two", "this is not CUDA {", "tiny"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("delete one first"));
}

}  // namespace
}  // namespace kerneleval::testing

namespace kerneleval::testing {
namespace {

// The CLI's submit and submissions commands against the same real server.
int Cli(const std::vector<std::string>& args, std::string* out, std::string* err) {
  client::cli::CliConfig config;
  const absl::Status parsed = client::cli::ParseArgs(args, &config);
  if (!parsed.ok()) {
    *err = std::string(parsed.message());
    return client::cli::kExitUsage;
  }
  std::ostringstream o, e;
  const int rc = client::cli::RunSubmitCommand(config, o, e);
  *out = o.str();
  *err = e.str();
  return rc;
}

TEST(SubmitCli, RegistersListsAndDeletes) {
  const Fixture f = StartSubmissionsServer();
  const std::string source = std::string(KERNELEVAL_TEST_EXAMPLES_DIR) + "/naive_block_per_row.cu";
  std::string out, err;
  ASSERT_EQ(
      Cli({"submit", "--target", f.server.target(), "--source", source, "--entry",
           "naive_block_per_row", "--block", "256", "--rows-per-block", "1", "--name", "naive"},
          &out, &err),
      0)
      << err;
  EXPECT_THAT(out, HasSubstr("registered naive  sub-"));
  EXPECT_THAT(out, HasSubstr("naive_block_per_row"));
  EXPECT_THAT(out, HasSubstr("4096+0"));  // static + dynamic shared memory
  ASSERT_EQ(Cli({"submissions", "list", "--target", f.server.target()}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("naive"));
  EXPECT_THAT(out, HasSubstr(" bf16 "));
  ASSERT_EQ(Cli({"submissions", "delete", "naive", "--target", f.server.target()}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("deleted sub-"));
  EXPECT_EQ(Cli({"submissions", "get", "naive", "--target", f.server.target()}, &out, &err),
            client::cli::kExitInfrastructure);
  EXPECT_THAT(err, HasSubstr("NOT_FOUND"));
  // A plan of two kernels needs one --block, or one per --entry.
  EXPECT_EQ(Cli({"submit", "--target", f.server.target(), "--source", source, "--entry", "a",
                 "--entry", "b", "--block", "256", "--block", "128", "--block", "64",
                 "--rows-per-block", "1", "--name", "two"},
                &out, &err),
            client::cli::kExitUsage);
  EXPECT_THAT(err, HasSubstr("--block: given 3 times for 2 kernels"));
  // Bad input comes back with the server's code and field.
  EXPECT_EQ(
      Cli({"submit", "--target", f.server.target(), "--source", source, "--entry",
           "naive_block_per_row", "--block", "2048", "--rows-per-block", "1", "--name", "big"},
          &out, &err),
      client::cli::kExitInfrastructure);
  EXPECT_THAT(err, HasSubstr("INVALID_ARGUMENT: submission.launch_plan.kernels[0].block_size"));
}

}  // namespace
}  // namespace kerneleval::testing

namespace kerneleval::testing {
namespace {

// `submit --suite` on a server whose only device is the CPU: the kernel registers (it is
// compiled for a GPU arch, which needs none), and the benchmark is refused as the
// submission's, naming it and the device, not by the checked-call protocol it carries.
TEST(SubmitCli, SuiteOnACpuServerSaysTheSubmissionNeedsAGpu) {
  const Fixture f = StartSubmissionsServer();
  const std::string source = std::string(KERNELEVAL_TEST_EXAMPLES_DIR) + "/naive_block_per_row.cu";
  std::string out, err;
  EXPECT_EQ(Cli({"submit", "--target", f.server.target(), "--source", source, "--entry",
                 "naive_block_per_row", "--block", "256", "--rows-per-block", "1", "--name",
                 "on_cpu", "--suite", "fused_add_rmsnorm_h2048"},
                &out, &err),
            client::cli::kExitInfrastructure);
  EXPECT_THAT(out, HasSubstr("registered on_cpu  sub-"));
  EXPECT_THAT(err, HasSubstr("FAILED_PRECONDITION: implementations[0]: submission "));
  EXPECT_THAT(err, HasSubstr("needs a CUDA device, not cpu"));
  EXPECT_THAT(err, Not(HasSubstr("check_every_call")));
}

}  // namespace
}  // namespace kerneleval::testing
