#include "server/submissions/compiler.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "kerneleval/submission_abi.h"
#include "server/submissions/compile_log.h"
#include "server/submissions/source_rules.h"

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

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
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

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

Compiler::Compiler(CompilerOptions options) : options_(std::move(options)) {}

std::string Compiler::CacheKey(const internal::CompileRequest& request) {
  // Length-prefixed fields, so that no two requests share an encoding.
  std::string canon;
  auto add = [&canon](absl::string_view field) {
    absl::StrAppend(&canon, field.size(), ":", field);
  };
  // The ABI header is part of every compile: a cubin built against another version of it
  // is never reused.
  add(absl::StrCat("abi", KERNELEVAL_ABI_VERSION));
  add(absl::StrCat(static_cast<int>(request.language())));
  add(request.arch());
  add(request.fast_math() ? "fast_math" : "");
  for (const auto& d : request.defines()) add(absl::StrCat(d.name(), "=", d.value()));
  add("entries");
  for (const auto& e : request.entries()) add(e);
  add(request.source());
  return Sha256Hex(canon);
}

absl::StatusOr<internal::CompileResponse> Compiler::Compile(
    const internal::CompileRequest& request) {
  const std::string key = CacheKey(request);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      internal::CompileResponse hit = it->second->second;
      hit.mutable_diagnostics()->set_cache_hit(true);
      return hit;
    }
  }
  absl::StatusOr<internal::CompileResponse> response = RunTool(request);
  if (!response.ok()) return response.status();
  v1::CompileDiagnostics* d = response->mutable_diagnostics();
  d->set_log(SubmissionLogLines(d->log(), kSourceName));
  if (response->code() == 0) {
    if (absl::Status s = CheckModuleLimits(response->cubin(), options_.module_limits); !s.ok()) {
      return s;
    }
  }
  if (response->code() != 0) {
    absl::Status failed(static_cast<absl::StatusCode>(response->code()), response->message());
    failed.SetPayload(kCompileDiagnosticsPayload,
                      absl::Cord(response->diagnostics().SerializeAsString()));
    return failed;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t bytes = response->ByteSizeLong();
  if (bytes <= options_.cache_bytes && index_.count(key) == 0) {
    lru_.emplace_front(key, *response);
    index_[key] = lru_.begin();
    cached_bytes_ += bytes;
    while (cached_bytes_ > options_.cache_bytes && !lru_.empty()) {
      cached_bytes_ -= lru_.back().second.ByteSizeLong();
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return response;
}

absl::StatusOr<internal::CompileResponse> Compiler::RunTool(
    const internal::CompileRequest& request) {
  const std::string input = request.SerializeAsString();
  // stdin is a socket so that writing to a child that died is EPIPE (MSG_NOSIGNAL), not a
  // SIGPIPE for the server.
  int in_pair[2];
  int out_pipe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  Fd in_parent(in_pair[0]), in_child(in_pair[1]);
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  Fd out_parent(out_pipe[0]), out_child(out_pipe[1]);

  std::string tool = options_.tool_path;
  std::string flag = "--cuda-include-dir";
  std::string dir = options_.cuda_include_dir;
  std::string unconfined = "--allow-unconfined-compile";
  std::vector<char*> argv = {tool.data()};
  if (!dir.empty()) {
    argv.push_back(flag.data());
    argv.push_back(dir.data());
  }
  if (options_.allow_unconfined) argv.push_back(unconfined.data());
  argv.push_back(nullptr);
  std::string library_path =
      options_.library_path.empty() ? "" : absl::StrCat("LD_LIBRARY_PATH=", options_.library_path);
  std::vector<char*> envp;
  if (!library_path.empty()) envp.push_back(library_path.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) ExecTool(in_child.get(), out_child.get(), options_, argv.data(), envp.data());
  in_child.Close();
  out_child.Close();
  fcntl(in_parent.get(), F_SETFL, O_NONBLOCK);
  fcntl(out_parent.get(), F_SETFL, O_NONBLOCK);

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.wall_seconds);
  std::size_t written = 0;
  std::string output;
  bool too_large = false;
  bool timed_out = false;
  bool eof = false;
  if (input.empty()) shutdown(in_parent.get(), SHUT_WR);
  while (!eof) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_parent.get(), POLLIN, 0}, {in_parent.get(), POLLOUT, 0}};
    const bool writing = written < input.size();
    if (poll(fds, writing ? 2 : 1, static_cast<int>(std::min<long long>(left.count(), 1000))) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (writing && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n =
          send(in_parent.get(), input.data() + written, input.size() - written, MSG_NOSIGNAL);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // child gone
      if (written == input.size()) shutdown(in_parent.get(), SHUT_WR);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      const ssize_t n = read(out_parent.get(), buf, sizeof(buf));
      if (n == 0) eof = true;
      if (n > 0) output.append(buf, static_cast<std::size_t>(n));
      if (output.size() > options_.max_output_bytes) {
        too_large = true;
        break;
      }
    }
  }
  int wstatus = 0;
  // A child that closed its stdout is exiting; one that closed it early and lingers is
  // treated like one that ran out of time.
  while (!timed_out && !too_large) {
    const pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    usleep(1000);
  }
  if (timed_out || too_large) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("submission.source: compilation ran past its ",
                                                    options_.wall_seconds,
                                                    " s limit and was stopped"));
  }
  if (too_large) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "submission.source: the compiled result exceeds ", options_.max_output_bytes, " bytes"));
  }
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    if (sig == SIGXCPU || sig == SIGKILL) {
      return absl::DeadlineExceededError(
          absl::StrCat("submission.source: compilation used more than its ", options_.cpu_seconds,
                       " s of CPU time and was stopped"));
    }
    // NVRTC aborts (std::bad_alloc) or faults when it runs out of address space.
    return absl::ResourceExhaustedError(absl::StrCat(
        "submission.source: the compiler stopped with signal ", sig, " (", strsignal(sig),
        "), most likely at its ", options_.address_space_bytes >> 20, " MiB memory limit"));
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127 && output.empty()) {
    return absl::InternalError(
        absl::StrCat("cannot start the compiler '", options_.tool_path, "'"));
  }
  internal::CompileResponse response;
  if (!response.ParseFromString(output)) {
    return absl::InternalError(absl::StrCat("the compiler exited with status ",
                                            WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
                                            " and an answer that does not parse"));
  }
  return response;
}

}  // namespace kerneleval::server::submissions
