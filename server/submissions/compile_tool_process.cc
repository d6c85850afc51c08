#include "server/submissions/compile_tool_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kerneleval::server::submissions {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

using Clock = std::chrono::steady_clock;
using Deadline = decltype(Clock::now() + std::chrono::duration<double>(0));

class Fd {
 public:
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Both ends of the child's stdin and stdout.
struct ToolPipes {
  Fd in_parent, in_child, out_parent, out_child;
};

absl::Status OpenPipes(ToolPipes& pipes) {
  // stdin is a socket so that writing to a child that died is EPIPE (MSG_NOSIGNAL), not a
  // SIGPIPE for the server.
  int in_pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  pipes.in_parent.Reset(in_pair[0]);
  pipes.in_child.Reset(in_pair[1]);
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  pipes.out_parent.Reset(out_pipe[0]);
  pipes.out_child.Reset(out_pipe[1]);
  return absl::OkStatus();
}

// The tool's argv and envp, built before the fork; the strings they point into live here.
class ToolCommand {
 public:
  explicit ToolCommand(const CompilerOptions& o)
      : tool_(o.tool_path),
        dir_(o.cuda_include_dir),
        library_path_(o.library_path.empty() ? ""
                                             : absl::StrCat("LD_LIBRARY_PATH=", o.library_path)) {
    argv_.push_back(tool_.data());
    if (!dir_.empty()) {
      argv_.push_back(flag_.data());
      argv_.push_back(dir_.data());
    }
    if (o.allow_unconfined) argv_.push_back(unconfined_.data());
    argv_.push_back(nullptr);
    if (!library_path_.empty()) envp_.push_back(library_path_.data());
    envp_.push_back(nullptr);
  }
  ToolCommand(const ToolCommand&) = delete;
  ToolCommand& operator=(const ToolCommand&) = delete;

  char* const* argv() { return argv_.data(); }
  char* const* envp() { return envp_.data(); }

 private:
  std::string tool_;
  std::string flag_ = "--cuda-include-dir";
  std::string dir_;
  std::string unconfined_ = "--allow-unconfined-compile";
  std::string library_path_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

// The child between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecTool(int stdin_fd, int stdout_fd, const CompilerOptions& o,
                           char* const argv[], char* const envp[]) {
  dup2(stdin_fd, 0);
  dup2(stdout_fd, 1);
  const int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) dup2(devnull, 2);
  auto limit = [](int resource, rlim_t soft, rlim_t hard) {
    rlimit r{soft, hard};
    setrlimit(resource, &r);
  };
  // ASan reserves terabytes of shadow address space: under it the memory bound is off.
  if (!kAddressSanitizer) limit(RLIMIT_AS, o.address_space_bytes, o.address_space_bytes);
  limit(RLIMIT_CPU, static_cast<rlim_t>(o.cpu_seconds), static_cast<rlim_t>(o.cpu_seconds) + 1);
  limit(RLIMIT_FSIZE, 1 << 20, 1 << 20);  // the tool writes no files; its answer is a pipe
  limit(RLIMIT_CORE, 0, 0);
  // `envp` (CompilerOptions::library_path at most): no secret of the server's reaches the tool,
  // whose first act is to clear even that. Under ASan the sanitizer's options (read before main)
  // pass.
  execve(argv[0], argv, kAddressSanitizer ? environ : envp);
  _exit(127);
}

// Starts the tool on the child's ends of `pipes`, closes them here and makes the parent's
// ends non-blocking.
absl::StatusOr<pid_t> SpawnTool(const CompilerOptions& options, ToolPipes& pipes) {
  ToolCommand command(options);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ExecTool(pipes.in_child.get(), pipes.out_child.get(), options, command.argv(), command.envp());
  }
  pipes.in_child.Close();
  pipes.out_child.Close();
  fcntl(pipes.in_parent.get(), F_SETFL, O_NONBLOCK);
  fcntl(pipes.out_parent.get(), F_SETFL, O_NONBLOCK);
  return pid;
}

// What the tool wrote, and whether a limit cut the exchange short.
struct ToolOutput {
  std::string bytes;
  bool too_large = false;
  bool timed_out = false;
};

// Writes `input` to the tool's stdin while reading its stdout, until the tool closes its
// stdout, the deadline passes or the answer grows past `max_output_bytes`.
ToolOutput ExchangeWithTool(int in_fd, int out_fd, const std::string& input, Deadline deadline,
                            std::uint64_t max_output_bytes) {
  ToolOutput out;
  std::size_t written = 0;
  bool eof = false;
  if (input.empty()) shutdown(in_fd, SHUT_WR);
  while (!eof) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {in_fd, POLLOUT, 0}};
    const bool writing = written < input.size();
    if (poll(fds, writing ? 2 : 1, static_cast<int>(std::min<long long>(left.count(), 1000))) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (writing && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = send(in_fd, input.data() + written, input.size() - written, MSG_NOSIGNAL);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // child gone
      if (written == input.size()) shutdown(in_fd, SHUT_WR);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      const ssize_t n = read(out_fd, buf, sizeof(buf));
      if (n == 0) eof = true;
      if (n > 0) out.bytes.append(buf, static_cast<std::size_t>(n));
      if (out.bytes.size() > max_output_bytes) {
        out.too_large = true;
        break;
      }
    }
  }
  return out;
}

// The tool's wait status. A child that closed its stdout is exiting; one that closed it early
// and lingers is treated like one that ran out of time. One stopped by a limit is killed.
int ReapTool(pid_t pid, Deadline deadline, ToolOutput& out) {
  int wstatus = 0;
  while (!out.timed_out && !out.too_large) {
    const pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      out.timed_out = true;
      break;
    }
    usleep(1000);
  }
  if (out.timed_out || out.too_large) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  return wstatus;
}

// The limit a tool stopped by signal `sig` ran into.
absl::Status SignalledStatus(const CompilerOptions& options, int sig) {
  if (sig == SIGXCPU || sig == SIGKILL) {
    return absl::DeadlineExceededError(
        absl::StrCat("submission.source: compilation used more than its ", options.cpu_seconds,
                     " s of CPU time and was stopped"));
  }
  // NVRTC aborts (std::bad_alloc) or faults when it runs out of address space.
  return absl::ResourceExhaustedError(absl::StrCat(
      "submission.source: the compiler stopped with signal ", sig, " (", strsignal(sig),
      "), most likely at its ", options.address_space_bytes >> 20, " MiB memory limit"));
}

// The tool's answer, or why there is none: the limit that stopped it, a tool that never
// started, or an answer that does not parse.
absl::StatusOr<internal::CompileResponse> ToolAnswer(const CompilerOptions& options,
                                                     const ToolOutput& out, int wstatus) {
  if (out.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("submission.source: compilation ran past its ",
                                                    options.wall_seconds,
                                                    " s limit and was stopped"));
  }
  if (out.too_large) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "submission.source: the compiled result exceeds ", options.max_output_bytes, " bytes"));
  }
  if (WIFSIGNALED(wstatus)) return SignalledStatus(options, WTERMSIG(wstatus));
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127 && out.bytes.empty()) {
    return absl::InternalError(absl::StrCat("cannot start the compiler '", options.tool_path, "'"));
  }
  internal::CompileResponse response;
  if (!response.ParseFromString(out.bytes)) {
    return absl::InternalError(absl::StrCat("the compiler exited with status ",
                                            WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
                                            " and an answer that does not parse"));
  }
  return response;
}

}  // namespace

absl::StatusOr<internal::CompileResponse> RunCompileTool(const CompilerOptions& options,
                                                         const std::string& input) {
  ToolPipes pipes;
  if (absl::Status s = OpenPipes(pipes); !s.ok()) return s;
  const absl::StatusOr<pid_t> pid = SpawnTool(options, pipes);
  if (!pid.ok()) return pid.status();
  const Deadline deadline = Clock::now() + std::chrono::duration<double>(options.wall_seconds);
  ToolOutput out = ExchangeWithTool(pipes.in_parent.get(), pipes.out_parent.get(), input, deadline,
                                    options.max_output_bytes);
  const int wstatus = ReapTool(*pid, deadline, out);
  return ToolAnswer(options, out, wstatus);
}

}  // namespace kerneleval::server::submissions
