// Two real kerneleval-server processes that want the same port or the same --data-dir: the
// second must exit non-zero with a message naming the address (gRPC's default SO_REUSEPORT
// would let it start and silently take half the connections) or the directory and the
// lock's holder; and once the first is gone, the directory is free again.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace kerneleval::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A kerneleval-server child: stdout and stderr to files in `dir`; SIGTERM and reaped on
// destruction if still running.
class ServerProcess {
 public:
  ServerProcess(const fs::path& dir, const std::string& name, std::vector<std::string> args)
      : err_(dir / (name + ".stderr")) {
    args.insert(args.begin(), KERNELEVAL_SERVER_BINARY);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, (dir / (name + ".stdout")).c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&files, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (posix_spawn(&pid_, argv[0], &files, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&files);
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGTERM);
      Wait(std::chrono::seconds(60));
      if (!exited_) kill(pid_, SIGKILL);
      int status = 0;
      if (!exited_) waitpid(pid_, &status, 0);
    }
  }

  bool started() const { return pid_ > 0; }
  // Waits up to `limit` for the process to exit; its exit code, or -1 if still running (or
  // killed by a signal).
  int Wait(std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!exited_ && std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return exited_ ? code_ : -1;
  }
  bool running() {
    Wait(std::chrono::seconds(0));
    return !exited_;
  }
  std::string err() const { return ReadFile(err_); }

 private:
  fs::path err_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

// The gRPC port from a --port-file once the server writes it; 0 after 120 s or if the
// process exits first.
int WaitForPort(ServerProcess* p, const fs::path& port_file) {
  for (int i = 0; i < 1200 && p->running(); ++i) {
    const std::string text = ReadFile(port_file);
    const std::size_t at = text.find("\"grpc_port\": ");
    if (at != std::string::npos) return std::stoi(text.substr(at + 13));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

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
