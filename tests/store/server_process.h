// A real kerneleval-server in a child process (the binary the build made), its stdout and
// stderr in files: what tests of whole processes share (a second server on a taken port, a
// server killed mid-job). KERNELEVAL_SERVER_BINARY names the binary.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kerneleval::testing {

namespace fs = std::filesystem;

inline std::string ReadFile(const fs::path& path) {
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
  pid_t pid() const { return pid_; }
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
  // Sends `signal` (SIGKILL: a server that dies mid-job; SIGTERM: one that is stopped).
  void Signal(int signal) const {
    if (pid_ > 0 && !exited_) kill(pid_, signal);
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
inline int WaitForPort(ServerProcess* p, const fs::path& port_file) {
  for (int i = 0; i < 1200 && p->running(); ++i) {
    const std::string text = ReadFile(port_file);
    const std::size_t at = text.find("\"grpc_port\": ");
    if (at != std::string::npos) return std::stoi(text.substr(at + 13));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

// A fleet member's first arguments: a CPU device, an ephemeral port written to
// `dir`/`name`.port, no metrics endpoint, `name` as its node name.
inline std::vector<std::string> FleetServerArgs(const fs::path& dir, const std::string& name) {
  return {"--device",         "cpu",
          "--listen",         "127.0.0.1:0",
          "--port-file",      (dir / (name + ".port")).string(),
          "--metrics-listen", "",
          "--node-name",      name};
}

}  // namespace kerneleval::testing
