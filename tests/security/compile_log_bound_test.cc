// What one owner's compile logs may cost, from the outside: a real server on loopback with
// submissions on and a data directory, real kerneleval-compile processes, sources that make
// NVRTC write hundreds of kilobytes of warnings. Each stored log is bounded, in the answers,
// in memory and in the data directory's database, and the owner's own list keeps working however
// many such submissions it holds.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "kerneleval/internal/compile.pb.h"
#include "kerneleval/v1/submissions.grpc.pb.h"
#include "server/store/database.h"
#include "server/submissions/bounded_log.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

namespace fs = std::filesystem;
using server::submissions::kMaxCompileLogBytes;
using ::testing::HasSubstr;

// A kernel after `functions` device functions, each with a variable it never reads: one
// "declared but never referenced" warning each, about 200 bytes of log. `scale` makes other
// content.
std::string NoisySource(int functions, int scale) {
  std::string source = "#include <kerneleval/submission_abi.h>\n";
  for (int i = 0; i < functions; ++i) {
    source +=
        "__device__ void f" + std::to_string(i) + "() { int unused_" + std::to_string(i) + "; }\n";
  }
  return source +
         "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
         "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps * " +
         std::to_string(scale) + ".0f;\n}\n";
}

struct DataDir {
  fs::path path =
      fs::temp_directory_path() / ("kerneleval-log-bound-" + std::to_string(getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  DataDir() { fs::remove_all(path); }
  ~DataDir() { fs::remove_all(path); }
};

SubmissionsServer StartWithDataDir(const DataDir& dir) {
  server::ServerOptions o = SubmissionOptions();
  o.submissions.data_dir = dir.path.string();
  return StartSubmissionsServer(o);
}

TEST(CompileLogBound, AHugeLogIsStoredAndAnsweredBounded) {
  const DataDir dir;
  const SubmissionsServer f = StartWithDataDir(dir);
  v1::RegisterSubmissionResponse registered;
  const grpc::Status s = f.submissions->Register(
      OneKernelSpec("noisy", NoisySource(2000, 1), "tiny", v1::DTYPE_FP32, 32), &registered);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string& log = registered.submission().diagnostics().log();
  EXPECT_LE(log.size(), kMaxCompileLogBytes);
  EXPECT_THAT(log, HasSubstr("lines of the compile log left out"));
  EXPECT_THAT(log, HasSubstr("submission.cu(2): warning"));  // the head: the first warning

  v1::GetSubmissionResponse got;
  ASSERT_TRUE(f.submissions->Get("noisy", &got).ok());
  EXPECT_EQ(got.submission().diagnostics().log(), log);
  // As kept: a row of the data directory's database (records base64, migration 0005).
  auto db = server::store::OpenSqlite((dir.path / "results.sqlite3").string());
  ASSERT_TRUE(db.ok()) << db.status();
  auto rows = (*db)->Query("SELECT record FROM submissions");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(rows->front()[0].value_or(""), &bytes));
  internal::StoredSubmission stored;
  ASSERT_TRUE(stored.ParseFromString(bytes));
  EXPECT_LE(stored.submission().diagnostics().log().size(), kMaxCompileLogBytes);
}

TEST(CompileLogBound, ManyNoisySubmissionsStillList) {
  const DataDir dir;
  const SubmissionsServer f = StartWithDataDir(dir);
  constexpr int kCount = 6;
  for (int i = 0; i < kCount; ++i) {
    v1::RegisterSubmissionResponse r;
    const grpc::Status s =
        f.submissions->Register(OneKernelSpec("noisy" + std::to_string(i), NoisySource(2000, i + 1),
                                              "tiny", v1::DTYPE_FP32, 32),
                                &r);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
  }
  // The client library follows the pages: every one, no logs and no sources.
  v1::ListSubmissionsResponse all;
  ASSERT_TRUE(f.submissions->List(&all).ok());
  ASSERT_EQ(all.submissions_size(), kCount);
  for (const v1::Submission& sub : all.submissions()) {
    EXPECT_TRUE(sub.diagnostics().log().empty()) << sub.spec().name();
    EXPECT_TRUE(sub.spec().source().empty()) << sub.spec().name();
  }
  // Pages of two, by name, through the bare stub.
  auto stub = v1::Submissions::NewStub(f.channel);
  v1::ListSubmissionsRequest request;
  request.set_page_size(2);
  std::vector<std::string> names;
  for (int page = 0; page < kCount; ++page) {
    grpc::ClientContext context;
    v1::ListSubmissionsResponse response;
    ASSERT_TRUE(stub->ListSubmissions(&context, request, &response).ok());
    EXPECT_LE(response.submissions_size(), 2);
    for (const v1::Submission& sub : response.submissions()) names.push_back(sub.spec().name());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  EXPECT_EQ(names,
            std::vector<std::string>({"noisy0", "noisy1", "noisy2", "noisy3", "noisy4", "noisy5"}));
  request.set_page_size(1001);
  grpc::ClientContext context;
  v1::ListSubmissionsResponse response;
  const grpc::Status too_big = stub->ListSubmissions(&context, request, &response);
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(too_big.error_message(), HasSubstr("page_size: 1001; at most 1000"));
}

TEST(CompileLogBound, ALogStoredWholeByAnOlderReleaseIsBoundedOnLoad) {
  const DataDir dir;
  internal::StoredSubmission stored;
  {
    // Registered where nothing is kept, to have a real record to age.
    const SubmissionsServer f = StartSubmissionsServer(SubmissionOptions());
    v1::RegisterSubmissionResponse r;
    ASSERT_TRUE(
        f.submissions
            ->Register(OneKernelSpec("old", NoisySource(1, 1), "tiny", v1::DTYPE_FP32, 32), &r)
            .ok());
    *stored.mutable_submission() = r.submission();
  }
  // The file as a release without the bound and without the database kept it: 4 MiB of log,
  // mode 0644.
  stored.mutable_submission()->mutable_diagnostics()->set_log(std::string(4 << 20, 'w'));
  const fs::path file =
      dir.path / "submissions" /
      (absl::BytesToHexString("anonymous") + "-" + stored.submission().id() + ".pb");
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary | std::ios::trunc) << stored.SerializeAsString();
  fs::permissions(file, static_cast<fs::perms>(0644));

  // Moved into the database at start, bounded, the file kept as *.pb.imported: bounded too,
  // and the owner's alone.
  const SubmissionsServer f = StartWithDataDir(dir);
  v1::GetSubmissionResponse got;
  ASSERT_TRUE(f.submissions->Get("old", &got).ok());
  EXPECT_LE(got.submission().diagnostics().log().size(), kMaxCompileLogBytes);
  const fs::path imported = fs::path(file).concat(".imported");
  ASSERT_TRUE(fs::exists(imported));
  std::ifstream in(imported, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  internal::StoredSubmission kept;
  ASSERT_TRUE(kept.ParseFromString(bytes.str()));
  EXPECT_LE(kept.submission().diagnostics().log().size(), kMaxCompileLogBytes);
  EXPECT_EQ(static_cast<unsigned>(fs::status(imported).permissions()) & 0777, 0600u);
}

}  // namespace
}  // namespace kerneleval::testing
