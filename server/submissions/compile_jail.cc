#include "server/submissions/compile_jail.h"

#include <errno.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/submissions/compile_jail_seccomp.h"

namespace kerneleval::server::submissions {
namespace {

// Rights and fields newer than the Debian 12 header; the values are the kernel's ABI.
constexpr std::uint64_t kFsRefer = 1ULL << 13;     // ABI 2
constexpr std::uint64_t kFsTruncate = 1ULL << 14;  // ABI 3
constexpr std::uint64_t kFsIoctlDev = 1ULL << 15;  // ABI 5
constexpr std::uint64_t kNetBindTcp = 1ULL << 0;   // ABI 4
constexpr std::uint64_t kNetConnectTcp = 1ULL << 1;
constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr std::uint64_t kScopeSignal = 1ULL << 1;

// landlock_ruleset_attr as of ABI 6; the kernel takes the prefix its ABI knows.
struct RulesetAttr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;
  std::uint64_t scoped = 0;
};

class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat("compile jail: ", what, ": ", std::strerror(errno)));
}

absl::Status SetLimits() {
  // No core file (it would hold the source and whatever NVRTC read), no new process, and
  // only the descriptors a compile needs (stdio; nothing is opened in the jail).
  const struct {
    int resource;
    rlim_t value;
    const char* name;
  } limits[] = {{RLIMIT_CORE, 0, "RLIMIT_CORE"},
                {RLIMIT_NPROC, 0, "RLIMIT_NPROC"},
                {RLIMIT_NOFILE, 32, "RLIMIT_NOFILE"}};
  for (const auto& l : limits) {
    const rlimit r{l.value, l.value};
    if (setrlimit(l.resource, &r) != 0) return Errno(absl::StrCat("setrlimit ", l.name));
  }
  return absl::OkStatus();
}

// A ruleset that handles every filesystem right the kernel knows and grants none: nothing
// can be opened, listed or written, even by a call the seccomp filter does not name. Files
// opened or mapped before (NVRTC's libraries, stdio) stay usable.
absl::Status RestrictFilesystem(int abi) {
  RulesetAttr attr;
  std::size_t attr_size = sizeof(std::uint64_t);
  attr.handled_access_fs = (1ULL << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) attr.handled_access_fs |= kFsRefer;
  if (abi >= 3) attr.handled_access_fs |= kFsTruncate;
  if (abi >= 5) attr.handled_access_fs |= kFsIoctlDev;
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;  // no rule: no TCP at all
    attr_size = 2 * sizeof(std::uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof(RulesetAttr);
  }
  OwnedFd ruleset(static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0)));
  if (ruleset.get() < 0) return Errno("landlock_create_ruleset");
  if (syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return Errno("landlock_restrict_self");
  }
  return absl::OkStatus();
}

}  // namespace

int LandlockAbiVersion() {
  const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

std::vector<std::pair<std::string, bool>> CompileJailLayers::Named() const {
  return {{"landlock", landlock_abi >= 1},
          {"seccomp_open_ban", seccomp},
          {"seccomp_syscalls", seccomp},
          {"rlimits", true}};
}

std::string CompileJailLayers::Describe() const {
  std::string line = "compile jail:";
  for (const auto& [layer, holds] : Named()) {
    absl::StrAppend(&line, " ", layer, holds ? "=on" : "=off");
    if (layer == "landlock" && holds) absl::StrAppend(&line, " (ABI ", landlock_abi, ")");
  }
  if (!seccomp) {
    absl::StrAppend(&line,
                    "; no seccomp filters: compiles are refused without "
                    "--allow-unconfined-compile, and with it NVRTC can open ",
                    landlock_abi >= 1 ? "nothing (Landlock)" : "any file the server can");
  } else if (landlock_abi < 1) {
    absl::StrAppend(&line, "; no Landlock: the seccomp open ban alone keeps files out");
  }
  return line;
}

CompileJailLayers ProbeCompileJailLayers() {
  return CompileJailLayers{LandlockAbiVersion(), SeccompFiltersAvailable()};
}

absl::Status EnterCompileJail(bool allow_unconfined) {
  if (absl::Status s = SetLimits(); !s.ok()) return s;
  // Landlock and an unprivileged seccomp filter both need it; it also makes set-uid binaries
  // inert, should anything ever get to exec one.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("PR_SET_NO_NEW_PRIVS");
  if (const int abi = LandlockAbiVersion(); abi >= 1) {
    if (absl::Status s = RestrictFilesystem(abi); !s.ok()) return s;
  }
  absl::Status s = LoadCompileSeccompFilter();
  if (absl::IsFailedPrecondition(s) && allow_unconfined) return absl::OkStatus();
  return s;
}

}  // namespace kerneleval::server::submissions
