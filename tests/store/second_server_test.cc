// Two real kerneleval-server processes that want the same port or the same --data-dir: the
// second must exit non-zero with a message naming the address (gRPC's default SO_REUSEPORT
// would let it start and silently take half the connections) or the directory and the
// lock's holder; and once the first is gone, the directory is free again.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server_process.h"

namespace kerneleval::testing {
namespace {

namespace fs = std::filesystem;

class SecondServer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kerneleval-second-server-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Flags every server here shares: the CPU, metrics on a port of its own.
  std::vector<std::string> Flags(const std::string& listen, const fs::path& data_dir) const {
    return {"--device", "cpu",  "--metrics-listen", "127.0.0.1:0",
            "--listen", listen, "--data-dir",       data_dir.string()};
  }

  fs::path dir_;
};

TEST_F(SecondServer, RefusesAPortInUseNamingTheAddress) {
  std::vector<std::string> first_flags = Flags("127.0.0.1:0", dir_ / "a");
  first_flags.insert(first_flags.end(), {"--port-file", (dir_ / "a.port").string()});
  ServerProcess first(dir_, "first", first_flags);
  ASSERT_TRUE(first.started());
  const int port = WaitForPort(&first, dir_ / "a.port");
  ASSERT_GT(port, 0) << first.err();
  const std::string address = "127.0.0.1:" + std::to_string(port);

  ServerProcess second(dir_, "second", Flags(address, dir_ / "b"));
  const int code = second.Wait(std::chrono::seconds(120));
  EXPECT_NE(code, -1) << "the second server on " << address << " is still running";
  EXPECT_NE(code, 0);
  EXPECT_NE(second.err().find("--listen: cannot listen on " + address), std::string::npos)
      << second.err();
  EXPECT_NE(second.err().find("in use"), std::string::npos) << second.err();

  // The health port too.
  std::vector<std::string> health_flags = Flags("127.0.0.1:0", dir_ / "c");
  health_flags.insert(health_flags.end(), {"--health-listen", address});
  ServerProcess third(dir_, "third", health_flags);
  EXPECT_GT(third.Wait(std::chrono::seconds(120)), 0);
  EXPECT_NE(third.err().find("--health-listen: cannot listen on " + address), std::string::npos)
      << third.err();
  EXPECT_TRUE(first.running()) << first.err();
}

TEST_F(SecondServer, RefusesADataDirInUseNamingItAndFreesItOnExit) {
  const fs::path shared = dir_ / "shared";
  std::vector<std::string> first_flags = Flags("127.0.0.1:0", shared);
  first_flags.insert(first_flags.end(), {"--port-file", (dir_ / "a.port").string()});
  auto first = std::make_unique<ServerProcess>(dir_, "first", first_flags);
  ASSERT_GT(WaitForPort(first.get(), dir_ / "a.port"), 0) << first->err();

  ServerProcess second(dir_, "second", Flags("127.0.0.1:0", shared));
  const int code = second.Wait(std::chrono::seconds(120));
  EXPECT_NE(code, -1) << "the second server on " << shared << " is still running";
  EXPECT_NE(code, 0);
  const std::string err = second.err();
  EXPECT_NE(err.find("--data-dir: '" + shared.string() + "' is in use"), std::string::npos) << err;
  EXPECT_NE(err.find("another kerneleval-server"), std::string::npos) << err;
  EXPECT_TRUE(first->running()) << first->err();

  first.reset();  // SIGTERM, drained, exited: the kernel released the lock
  std::vector<std::string> third_flags = Flags("127.0.0.1:0", shared);
  third_flags.insert(third_flags.end(), {"--port-file", (dir_ / "c.port").string()});
  ServerProcess third(dir_, "third", third_flags);
  EXPECT_GT(WaitForPort(&third, dir_ / "c.port"), 0) << third.err();
}

}  // namespace
}  // namespace kerneleval::testing
