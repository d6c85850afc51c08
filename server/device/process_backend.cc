#include "server/device/process_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/conversions.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/device/bounded_reap.h"
#include "server/device/device_host_reply.h"
#include "server/device/device_settings.h"
#include "server/device/measure_options.h"
#ifdef KERNELEVAL_HAVE_CUDA
#include "server/device/nvml.h"
#endif

extern char** environ;

namespace kerneleval::server {
namespace {

// The region is kept between calls (the host pins it once per size, and its pages stay
// mapped), but given back once it has been over 4x larger than needed for this many calls
// in a row, so that one large request does not hold its memory for the life of the host.
constexpr std::size_t kAlwaysKeptRegionBytes = std::size_t{64} << 20;
constexpr int kOversizedCallsBeforeShrink = 16;
constexpr std::size_t kSlotAlignment = 256;

// Owns a descriptor that is not a channel (the host's end while spawning).
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// posix_spawn's attribute objects, destroyed on every path.
struct SpawnAttributes {
  SpawnAttributes() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* what = strsignal(sig);
    return absl::StrCat("was killed by signal ", sig, " (", what ? what : "unknown", ")");
  }
  return "ended";
}

std::size_t Place(internal::Slot* slot, std::size_t bytes, std::size_t* used) {
  const std::size_t offset = (*used + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  slot->set_offset(offset);
  slot->set_bytes(bytes);
  *used = offset + bytes;
  return offset;
}

void FillCall(const Problem& problem, const std::string& impl, const MeasureOptions& options,
              internal::MeasureCall* call) {
  call->set_dtype(DTypeToProto(problem.dtype));
  call->set_mode(ModeToProto(problem.mode));
  call->set_batch(problem.batch);
  call->set_hidden(problem.hidden);
  call->set_eps(problem.eps);
  call->set_implementation(impl);
  *call->mutable_protocol() = ToProtocol(options);
  call->set_check_calls(options.check_calls);
  if (options.check_calls) *call->mutable_check_tolerance() = options.check_tolerance;
}

}  // namespace

ProcessBackend::ProcessBackend(std::string name, DeviceHostOptions options)
    : name_(std::move(name)), options_(std::move(options)) {}

ProcessBackend::~ProcessBackend() { KillHost(); }

absl::StatusOr<std::unique_ptr<ProcessBackend>> ProcessBackend::Launch(
    const std::string& device, const DeviceHostOptions& options) {
  std::unique_ptr<ProcessBackend> backend(new ProcessBackend(device, options));
  RETURN_IF_ERROR(backend->Spawn());
  return backend;
}

absl::Status ProcessBackend::Spawn() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  HostChannel channel(fds[0]);
  ScopedFd host_end(fds[1]);
  ASSIGN_OR_RETURN(SharedRegion region, SharedRegion::Create());
  // Copies at 10 and above, so that dup2 onto 3 and 4 always clears close-on-exec (dup2
  // onto the same number would not), and no other host inherits them.
  ScopedFd host_channel(fcntl(host_end.get(), F_DUPFD_CLOEXEC, 10));
  ScopedFd host_region(fcntl(region.fd(), F_DUPFD_CLOEXEC, 10));
  if (host_channel.get() < 0 || host_region.get() < 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", std::strerror(errno)));
  }

  SpawnAttributes spawn;
  posix_spawn_file_actions_adddup2(&spawn.actions, host_channel.get(), 3);
  posix_spawn_file_actions_adddup2(&spawn.actions, host_region.get(), 4);
  // Own process group: a terminal's Ctrl-C goes to the server, which drains and then
  // closes the hosts' channels. Signals start unblocked (the server blocks them).
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&spawn.attr, &none);
  posix_spawnattr_setpgroup(&spawn.attr, 0);
  posix_spawnattr_setflags(&spawn.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> args = {options_.executable, "--device", name_, "--channel-fd", "3",
                                   "--region-fd",       "4"};
  if (options_.fault_injection) args.push_back("--enable-fault-injection");
  if (options_.builtins_only) args.push_back("--builtins-only");
  // The server's own device settings: both ends of the link poll alike, and the host's
  // backend times as an in-process one would.
  for (std::string& a : DeviceHostArgs(CurrentDeviceSettings())) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, options_.executable.c_str(), &spawn.actions, &spawn.attr,
                             argv.data(), environ);
  if (rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device-host: cannot start '", options_.executable, "': ", std::strerror(rc)));
  }
  channel_ = std::move(channel);
  region_ = std::move(region);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = pid;
  }
  internal::HostIdentity identity;
  const absl::Status s = channel_.Receive(&identity, absl::Seconds(options_.start_timeout_seconds));
  if (!s.ok()) {
    const std::string how = KillHost();
    return absl::UnavailableError(
        absl::StrCat(name_, ": the device host did not start (it ", how, "; ", s.message(), ")"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  identity_ = std::move(identity);
  host_loaded_.clear();  // a new process has loaded no submission yet
  return absl::OkStatus();
}

absl::Status ProcessBackend::AwaitReady() {
  internal::HostReady ready;
  absl::Status s = channel_.Receive(&ready, absl::Seconds(options_.start_timeout_seconds));
  if (s.ok()) s = FromProto(ready.warm_up());
  if (!s.ok()) {
    const std::string how = KillHost();
    return absl::Status(s.code(), absl::StrCat(name_, ": the device host did not warm up (it ", how,
                                               "): ", s.message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = std::move(ready);
  healthy_ = true;
  return absl::OkStatus();
}

absl::Status ProcessBackend::WarmUp() { return AwaitReady(); }

absl::Status ProcessBackend::Recover() {
  const pid_t old = host_pid();
  const std::string how = KillHost();
  if (old != 0) LogWarning(absl::StrCat(name_, ": device host ", old, " ", how));
  RETURN_IF_ERROR(Spawn());
  RETURN_IF_ERROR(AwaitReady());
  LogInfo(absl::StrCat(name_, ": new device host ", host_pid(), " is serving"));
  return absl::OkStatus();
}

std::string ProcessBackend::KillHost(std::chrono::milliseconds grace) {
  pid_t pid = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    healthy_ = false;
    pid = std::exchange(pid_, 0);
  }
  channel_.Close();
  if (pid == 0) return "was not running";
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return DescribeExit(status);
    if (r < 0) return "could not be waited for";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Bounded: a host stuck in the driver may not die at once, and the worker must not wait.
  const std::optional<int> killed = KillAndReap(pid, std::chrono::seconds(5));
  if (!killed.has_value()) {
    return "did not end within 5 s of SIGKILL (stuck in the driver?); it is reaped in the "
           "background";
  }
  return absl::StrCat("did not exit and ", DescribeExit(*killed));
}

absl::Status ProcessBackend::HostLost(const std::string& during, const absl::Status& cause,
                                      bool hung) {
  ReportFault();  // readiness drops before the caller hears of it
  const pid_t pid = host_pid();
  // A hung host will not exit by itself.
  const std::string how = KillHost(hung ? std::chrono::milliseconds(0) : std::chrono::seconds(2));
  LogError(absl::StrCat(name_, ": device host ", pid, " ", how, " while ", during));
  return absl::InternalError(absl::StrCat(name_, ": the device host process ", how, " while ",
                                          during, " (", cause.message(),
                                          "); the device is being restarted"));
}

absl::Status ProcessBackend::Exchange(const internal::MeasureCall& call, const std::string& during,
                                      const MeasureOptions& options, internal::MeasureReply* reply,
                                      std::chrono::steady_clock::time_point* answered) {
  if (absl::Status s = channel_.Send(call); !s.ok()) return HostLost(during, s, false);
  const absl::Status received = channel_.Receive(
      reply, absl::Seconds(options_.call_timeout_seconds),
      [&] {
        if (options.should_stop && options.should_stop()) region_.stop_flag().store(1);
      },
      ReplySpin());
  if (received.code() == absl::StatusCode::kDeadlineExceeded) {
    return HostLost(
        during,
        absl::DeadlineExceededError(absl::StrCat("no answer within ", options_.call_timeout_seconds,
                                                 " s, --device-call-timeout-seconds")),
        /*hung=*/true);
  }
  *answered = std::chrono::steady_clock::now();
  if (!received.ok()) return HostLost(during, received, /*hung=*/false);
  return absl::OkStatus();
}

absl::Status ProcessBackend::ReplyStatus(const internal::MeasureReply& reply,
                                         const std::string& during) {
  absl::Status status = FromProto(reply.status());
  if (reply.healthy()) return status;
  // The host's device is faulted; it exits after this reply, and the worker starts a new
  // one before the next job.
  ReportFault();
  const pid_t pid = host_pid();
  LogError(absl::StrCat(name_, ": device host ", pid, " faulted (", reply.status().message(),
                        "); it ", KillHost()));
  // Name what was running: with submissions on, the caller needs to know whose kernel took
  // the device down.
  return absl::InternalError(absl::StrCat(name_, ": the device faulted while ", during, " (",
                                          status.message(), "); the device is being restarted"));
}

absl::StatusOr<Measurement> ProcessBackend::Measure(const Problem& problem,
                                                    const HostInputs& inputs,
                                                    const HostOutputs& outputs,
                                                    const std::string& impl,
                                                    const MeasureOptions& options) {
  if (!Healthy()) {
    return absl::UnavailableError(
        absl::StrCat(name_, " is restarting its device host after a fault"));
  }
  internal::MeasureCall call;
  FillCall(problem, impl, options, &call);
  bool loads_submission = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = submissions_.find(impl);
    if (it != submissions_.end() && host_loaded_.count(impl) == 0) {
      *call.mutable_submission()->mutable_submission() = it->second.submission;
      call.mutable_submission()->set_cubin(it->second.cubin);
      loads_submission = true;
    }
  }
  const std::size_t rows = problem.TensorBytes();
  std::size_t used = 0;
  const std::size_t hs = Place(call.mutable_hidden_states(), rows, &used);
  const std::size_t res = Place(call.mutable_residual(), rows, &used);
  const std::size_t w = Place(call.mutable_weight(), problem.WeightBytes(), &used);
  const bool want_out = outputs.output != nullptr;
  const bool want_res = outputs.residual_out != nullptr && WritesResidual(problem.mode);
  const std::size_t out = want_out ? Place(call.mutable_output(), rows, &used) : 0;
  const std::size_t rout = want_res ? Place(call.mutable_residual_out(), rows, &used) : 0;
  if (region_.data_bytes() < used) {
    // Grown to a power of two, so that sizes creeping up do not remap (and re-pin) each time.
    std::size_t grown = std::size_t{1} << 20;
    while (grown < used) grown *= 2;
    RETURN_IF_ERROR(region_.Resize(grown));
  }
  unsigned char* data = region_.data();
  const auto copy_in = std::chrono::steady_clock::now();
  std::memcpy(data + hs, inputs.hidden_states, rows);
  std::memcpy(data + res, inputs.residual, rows);
  std::memcpy(data + w, inputs.weight, problem.WeightBytes());
  call.set_region_bytes(region_.total_bytes());
  region_.stop_flag().store(0);

  const std::string during = absl::StrCat("running ", impl);
  const auto sent = std::chrono::steady_clock::now();
  internal::MeasureReply reply;
  auto answered = sent;
  RETURN_IF_ERROR(Exchange(call, during, options, &reply, &answered));
  const absl::Status status = ReplyStatus(reply, during);
  if (status.ok()) {
    if (want_out) std::memcpy(outputs.output, data + out, rows);
    if (want_res) std::memcpy(outputs.residual_out, data + rout, rows);
  }
  const auto copied_out = std::chrono::steady_clock::now();
  oversized_calls_ =
      region_.data_bytes() > kAlwaysKeptRegionBytes && region_.data_bytes() > 4 * used
          ? oversized_calls_ + 1
          : 0;
  if (oversized_calls_ >= kOversizedCallsBeforeShrink) {
    region_.Resize(used).IgnoreError();
    oversized_calls_ = 0;
  }
  if (!status.ok()) return status;
  if (loads_submission) {
    std::lock_guard<std::mutex> lock(mu_);
    host_loaded_.insert(impl);
  }

  Measurement m = FromMeasureReply(reply);
  // The copies through the shared region count with the host's own copies; the rest of the
  // time between sending the call and its answer is the round trip to the host process.
  auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  m.device_host_seconds = std::max(0.0, seconds(sent, answered) - m.host_to_device_seconds -
                                            m.device_seconds - m.device_to_host_seconds);
  m.host_to_device_seconds += seconds(copy_in, sent);
  m.device_to_host_seconds += seconds(answered, copied_out);
  return m;
}

v1::Device ProcessBackend::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  v1::Device d = identity_.device();
  d.set_measured_copy_bytes_per_second(ready_.copy_bytes_per_second());
  d.set_healthy(healthy_);
  return d;
}

std::vector<v1::Implementation> ProcessBackend::Implementations() const {
  // Loaded submissions are not listed: their owners reach them through the registry.
  std::lock_guard<std::mutex> lock(mu_);
  return {identity_.implementations().begin(), identity_.implementations().end()};
}

absl::Status ProcessBackend::AddSubmission(const SubmittedKernel& kernel) {
  RETURN_IF_ERROR(
      CheckSubmissions(capabilities(), kernel.submission.id(), name_, "implementation"));
  std::lock_guard<std::mutex> lock(mu_);
  submissions_[kernel.submission.id()] = kernel;
  return absl::OkStatus();
}

double ProcessBackend::MeasuredCopyBandwidth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.copy_bytes_per_second();
}

v1::Clocks ProcessBackend::ReadClocks(bool* available) {
  v1::Clocks clocks;
  *available = false;
#ifdef KERNELEVAL_HAVE_CUDA
  // NVML needs no CUDA context, so the server reads clocks itself, even while a host
  // restarts.
  std::string uuid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uuid = identity_.device().uuid();
  }
  if (absl::StartsWith(name_, "cuda:") && !uuid.empty()) {
    *available = Nvml::Get().ReadClocks(uuid, &clocks);
  }
#endif
  return clocks;
}

std::string ProcessBackend::DriverVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return identity_.driver_version();
}

std::string ProcessBackend::RuntimeVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return identity_.runtime_version();
}

std::string ProcessBackend::TimerStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.timer_status();
}

bool ProcessBackend::Healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!healthy_ || pid_ == 0) return false;
  // A host that has ended (killed from outside, out of memory) is seen here without being
  // reaped: KillHost() reaps it, on the worker thread.
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
         info.si_pid == 0;
}

pid_t ProcessBackend::host_pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_;
}

}  // namespace kerneleval::server
