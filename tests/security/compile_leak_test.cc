// Reading a file of the server's machine through the compile log, with Landlock and as on a
// kernel without it. The exploit: an #include inside a stringified macro argument (hidden
// from the include rules by a raw string) puts the file's text in a constexpr char[], and a
// static_assert and a template spelled from those bytes print it in errors located in
// submission.cu, which the log filter keeps. The jail must make every such file unreadable:
// a file the test plants, /etc/passwd, /proc/self/environ, a file of a library directory.
// Through a real server on loopback and real kerneleval-compile processes.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redteam_servers.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The include rules' lexer knows no raw strings: it sees a comment from /* to */ and no
// directive. In C++ the raw string ends at )x" and the rest is code.
std::string StringifiedInclude(const std::string& include) {
  return "#define KE_STR(...) #__VA_ARGS__\n"
         "__device__ const char* hide = R\"x(\n/*)x\";\n"
         "constexpr char leak[] = KE_STR(\n#include " +
         include +
         "\n);\n"
         "static_assert(sizeof(leak) == 1, KE_STR(\n#include " +
         include +
         "\n));\n"
         "template <char... C> struct Show;\n"
         "template <int N, char... C> struct Spell {\n"
         "  using type = typename Spell<N - 1, leak[N - 1], C...>::type;\n"
         "};\n"
         "template <char... C> struct Spell<0, C...> { using type = Show<C...>; };\n"
         "__device__ Spell<(sizeof(leak) > 48 ? 48 : sizeof(leak) - 1)>::type shown;\n"
         "// */\n";
}

// `text` as the template error spells it: 'a', 'b', ...
std::string Spelled(const std::string& text) {
  std::string out;
  for (char c : text) out += (out.empty() ? "'" : ", '") + std::string(1, c) + "'";
  return out;
}

// Expects that nothing of `needle` came back, as text or as the template spells it.
void ExpectNoLeak(const Answer& a, const std::string& needle, const std::string& what) {
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what << a.Text();
  EXPECT_THAT(a.Text(), Not(HasSubstr(needle))) << what;
  EXPECT_THAT(a.Text(), Not(HasSubstr(Spelled(needle.substr(0, 6))))) << what;
}

// The first line of `path` (which must be readable here, or the test proves nothing).
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_FALSE(line.empty()) << path;
  return line;
}

class CompileLeak : public ::testing::TestWithParam<Kernel> {};

TEST_P(CompileLeak, StringifiedIncludeShowsAnInMemoryHeader) {
  // The control: the exploit is live. A header the compiler may read (served from memory)
  // comes back in the log, so that a file that does not is one the jail kept out.
  const SubmissionsServer f = StartRedTeamServer(GetParam());
  const Answer a =
      Register(f, Spec("control", StringifiedInclude("<kerneleval/submission_abi.h>")));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << a.Text();
  // The header's guard leaves the static_assert's second include empty; the template
  // spells the first.
  EXPECT_THAT(a.Text(), HasSubstr(Spelled("typedef struct kerneleval_params")));
}

TEST_P(CompileLeak, PlantedFileDoesNotComeBack) {
  const PlantedFile planted;
  const SubmissionsServer f = StartRedTeamServer(GetParam());
  const Answer a =
      Register(f, Spec("planted", StringifiedInclude("\"" + planted.path.string() + "\"")));
  ExpectNoLeak(a, planted.marker, "planted file");
  EXPECT_THAT(a.Text(), Not(HasSubstr("PLANTED_SECRET")));
}

TEST_P(CompileLeak, EtcPasswdDoesNotComeBack) {
  const std::string root = FirstLine("/etc/passwd").substr(0, 10);  // "root:x:0:0"
  const SubmissionsServer f = StartRedTeamServer(GetParam());
  for (const std::string include : {"\"/etc/passwd\"", "</etc/passwd>"}) {
    ExpectNoLeak(Register(f, Spec("passwd", StringifiedInclude(include))), root, include);
  }
}

TEST_P(CompileLeak, ProcSelfEnvironDoesNotComeBack) {
  // The tool's one environment variable, LD_LIBRARY_PATH, holds the marker (a directory
  // that does not exist: the loader looks there first and moves on). clearenv() empties
  // environ, not the kernel's copy that /proc/self/environ reads.
  const std::string marker = NewMarker();
  server::ServerOptions o = RedTeamOptions(GetParam());
  o.submissions.compiler.library_path = "/nonexistent/" + marker;
  const SubmissionsServer f = StartSubmissionsServer(o);
  for (const std::string path : {"/proc/self/environ", "/proc/thread-self/environ"}) {
    ExpectNoLeak(Register(f, Spec("environ", StringifiedInclude("\"" + path + "\""))), marker,
                 path);
  }
}

TEST_P(CompileLeak, LibraryDirectoryFileDoesNotComeBack) {
  // NVRTC's libraries live in these directories; reading them is no longer needed once the
  // warm-up has loaded what it loads, so they are as closed as any other.
  const std::string path = "/usr/lib/os-release";
  const std::string first = FirstLine(path);
  const SubmissionsServer f = StartRedTeamServer(GetParam());
  const Answer a = Register(f, Spec("osrelease", StringifiedInclude("\"" + path + "\"")));
  ExpectNoLeak(a, first.substr(first.find('=') + 1), path);
  ExpectNoLeak(a, first.substr(0, first.find('=')), path);
}

TEST_P(CompileLeak, ExistingAndMissingAbsoluteIncludesAnswerTheSame) {
  // An oracle would tell which paths exist: each pair differs in the last character only,
  // and the answers in the name only.
  const PlantedFile planted;
  const SubmissionsServer f = StartRedTeamServer(GetParam());
  const std::vector<std::string> existing = {planted.path.string(), "/etc/passwd",
                                             "/usr/lib/os-release", "/proc/self/environ",
                                             "/usr/local/cuda/include/cuda_runtime.h"};
  for (const std::string& path : existing) {
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    const std::string missing = path.substr(0, path.size() - 1) + "~";
    ASSERT_FALSE(std::filesystem::exists(missing)) << missing;
    auto answer = [&](const std::string& p) {
      std::string message =
          Register(
              f, Spec("oracle", "const char* s = R\"x(\n/*)x\";\n#include \"" + p + "\"\n// */\n"))
              .status.error_message();
      for (std::size_t at = message.find(p); at != std::string::npos; at = message.find(p)) {
        message.replace(at, p.size(), "PATH");
      }
      return message;
    };
    const std::string found = answer(path);
    EXPECT_THAT(found, HasSubstr("cannot open source file \"PATH\"")) << path;
    EXPECT_EQ(found, answer(missing)) << path;
  }
}

TEST_P(CompileLeak, HonestSubmissionStillCompiles) {
  const SubmissionsServer f = StartRedTeamServer(GetParam());
  const Answer a =
      Register(f, Spec("honest", "#include <cuda_bf16.h>\n#include <cuda/std/cstdint>\n",
                       "__bfloat162float(__float2bfloat16(p.eps))"));
  ASSERT_TRUE(a.status.ok()) << a.Text();
  EXPECT_GT(a.response.submission().diagnostics().cubin_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CompileLeak,
                         ::testing::Values(Kernel::kAsItIs, Kernel::kWithoutLandlock), KernelName);

TEST(CompileLeakBothKernels, EveryExploitGetsTheSameAnswerWithAndWithoutLandlock) {
  const PlantedFile planted;
  const SubmissionsServer with = StartRedTeamServer(Kernel::kAsItIs);
  const SubmissionsServer without = StartRedTeamServer(Kernel::kWithoutLandlock);
  const std::vector<std::string> preludes = {
      StringifiedInclude("\"" + planted.path.string() + "\""),
      StringifiedInclude("\"/etc/passwd\""),
      StringifiedInclude("\"/proc/self/environ\""),
      StringifiedInclude("\"/usr/lib/os-release\""),
      StringifiedInclude("<kerneleval/submission_abi.h>"),
      "#if __has_include(\"/etc/passwd\")\n#error found\n#endif\n",
      "const char* s = R\"x(\n/*)x\";\n#include \"/etc/shadow\"\n// */\n",
      "#include <cuda_fp16.h>\n",
  };
  int n = 0;
  for (const std::string& prelude : preludes) {
    const std::string name = "same" + std::to_string(n++);
    const Answer a = Register(with, Spec(name, prelude));
    const Answer b = Register(without, Spec(name, prelude));
    EXPECT_EQ(a.status.error_code(), b.status.error_code()) << prelude;
    EXPECT_EQ(a.status.error_message(), b.status.error_message()) << prelude;
    EXPECT_EQ(a.response.submission().id(), b.response.submission().id()) << prelude;
  }
}

}  // namespace
}  // namespace kerneleval::testing
