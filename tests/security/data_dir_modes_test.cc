// What a server leaves under --data-dir, from the outside: a real server on loopback with
// submissions on, a registered submission and a stored benchmark, then every file it wrote
// (the lock, the submission records, SQLite's database, journal and shared-memory files)
// readable by the server's user alone, and every directory it made closed to others.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store_test_helpers.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kTiny[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";

unsigned ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Every file and directory under `root`, with its mode, the root included.
std::vector<std::pair<fs::path, unsigned>> Everything(const fs::path& root) {
  std::vector<std::pair<fs::path, unsigned>> out = {{root, ModeOf(root)}};
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root)) {
    out.emplace_back(e.path(), ModeOf(e.path()));
  }
  return out;
}

class DataDirModes : public ::testing::Test {
 protected:
  // The parent exists; the data directory itself is the server's to make.
  fs::path parent_ = TempDir("modes");
  fs::path dir_ = parent_ / "data" / "nested";

  void TearDown() override { fs::remove_all(parent_); }

  // A server on dir_ that registers a submission and stores one benchmark, then stops.
  void Populate(const std::string& name) {
    server::ServerOptions o = SubmissionOptions();
    o.submissions.data_dir = dir_.string();
    const SubmissionsServer s = StartSubmissionsServer(o);
    ASSERT_NE(s.server.server, nullptr);
    v1::RegisterSubmissionResponse r;
    std::string source = kTiny;
    source.replace(source.find("p.eps;"), 6, "p.eps * " + std::to_string(name.size()) + ".0f;");
    const grpc::Status registered =
        s.submissions->Register(OneKernelSpec(name, source, "tiny", v1::DTYPE_FP32, 32), &r);
    ASSERT_TRUE(registered.ok()) << registered.error_message();
    const v1::BenchmarkReport report = Bench(s.server, {"cpu_fused"});
    ASSERT_GT(report.results_size(), 0);
    // Kept open here: the files as a running server has them (SQLite's -wal and -shm).
    for (const auto& [path, mode] : Everything(dir_)) Check(path, mode);
  }

  static void Check(const fs::path& path, unsigned mode) {
    if (fs::is_directory(path)) {
      EXPECT_EQ(mode, 0700u) << path;
    } else {
      EXPECT_EQ(mode & 077, 0u) << path << " is " << std::oct << mode;
    }
  }
};

TEST_F(DataDirModes, EverythingTheServerWritesIsItsUsersAlone) {
  // The service managers' usual umask: files 0644 and directories 0755 unless made otherwise.
  const mode_t old = umask(022);
  Populate("first");
  umask(old);
  std::vector<std::string> names;
  for (const auto& [path, mode] : Everything(dir_)) names.push_back(path.filename().string());
  // The submission is a row of results.sqlite3, as the benchmark is.
  EXPECT_THAT(names, ::testing::IsSupersetOf({"nested", ".kerneleval.lock", "results.sqlite3"}));
  for (const auto& [path, mode] : Everything(dir_)) Check(path, mode);
  // Made by the server: its parent too.
  EXPECT_EQ(ModeOf(parent_ / "data"), 0700u);
}

TEST_F(DataDirModes, FilesAnOlderReleaseLeftReadableAreNarrowed) {
  Populate("first");
  for (const auto& [path, mode] : Everything(dir_)) {
    if (!fs::is_directory(path)) fs::permissions(path, static_cast<fs::perms>(0644));
  }
  const mode_t old = umask(022);
  Populate("second");
  umask(old);
  for (const char* kept : {".kerneleval.lock", "results.sqlite3"}) {
    EXPECT_EQ(ModeOf(dir_ / kept), 0600u) << kept;
  }
  // Files of submissions an older release kept are moved into the database, narrowed.
  if (fs::exists(dir_ / "submissions")) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir_ / "submissions")) {
      EXPECT_EQ(ModeOf(e.path()), 0600u) << e.path();
    }
  }
}

}  // namespace
}  // namespace kerneleval::testing
