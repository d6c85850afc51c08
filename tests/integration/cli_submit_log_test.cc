// `kerneleval submit` with a source that does not compile: the CLI asks for the compile error
// in the response body (RegisterSubmissionRequest.compile_error_in_response), so the whole
// NVRTC log is printed, past the head a status message may carry. A real server with
// submissions on and real kerneleval-compile processes (NVRTC needs no GPU).
#include <fstream>
#include <sstream>

#include "client/cli.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

TEST(CliSubmitLog, ACompileErrorPrintsTheWholeLog) {
  const SubmissionsServer s = StartSubmissionsServer();
  // Twelve errors after a valid kernel, each quoting its 3 KB line: tens of KB of log, the
  // last error (line 16) far past what a status message keeps.
  std::string source =
      "#include <kerneleval/submission_abi.h>\n"
      "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
      "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
      "}\n";
  for (int i = 0; i < 12; ++i) {
    source += "__device__ float f" + std::to_string(i) + "() { return " + std::string(3000, 'q') +
              std::to_string(i) + "; }\n";
  }
  const std::string path = ::testing::TempDir() + "/cli_submit_broken.cu";
  std::ofstream(path) << source;

  client::cli::CliConfig config;
  const absl::Status parsed = client::cli::ParseArgs(
      {"--target", s.server.target(), "submit", "--source", path, "--name", "broken", "--entry",
       "tiny", "--block", "32", "--rows-per-block", "1", "--dtype", "fp32"},
      &config);
  ASSERT_TRUE(parsed.ok()) << parsed;
  std::ostringstream out, err;
  const int rc = client::cli::RunSubmitCommand(config, out, err);
  const std::string text = err.str();
  EXPECT_EQ(rc, client::cli::kExitInfrastructure) << text.substr(0, 2048);
  EXPECT_EQ(text.rfind("error: INVALID_ARGUMENT: submission.source: compilation failed", 0), 0u)
      << text.substr(0, 2048);
  EXPECT_NE(text.find("\nNVRTC log:\n"), std::string::npos) << text.substr(0, 2048);
  // The first and the last error's lines, and every identifier the log quotes.
  EXPECT_NE(text.find("submission.cu(5)"), std::string::npos) << text.substr(0, 2048);
  EXPECT_NE(text.find("submission.cu(16)"), std::string::npos) << text.substr(text.size() / 2);
  EXPECT_NE(text.find(std::string(3000, 'q') + "11"), std::string::npos);
  EXPECT_GT(text.size(), std::size_t{16} << 10) << "only the status' head was printed";
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace kerneleval::testing
