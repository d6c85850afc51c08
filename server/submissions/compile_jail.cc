#include "server/submissions/compile_jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"

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

struct PathBeneath {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
} __attribute__((packed));

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
  // only the descriptors a compile needs (stdio and a library being mapped).
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

absl::Status AddReadRule(int ruleset, const std::string& path, std::uint64_t rights) {
  OwnedFd fd(open(path.c_str(), O_PATH | O_CLOEXEC));
  if (fd.get() < 0) return absl::OkStatus();  // a directory this machine lacks grants nothing
  const PathBeneath rule{rights, fd.get()};
  if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
    return Errno(absl::StrCat("landlock_add_rule ", path));
  }
  return absl::OkStatus();
}

absl::Status RestrictFilesystem(const CompileJailPaths& paths) {
  const int abi = LandlockAbiVersion();
  if (abi < 1) {
    return absl::FailedPreconditionError(
        "compile jail: this kernel has no Landlock (landlock_create_ruleset reports no ABI; "
        "Linux 5.13+ with lsm=landlock), so NVRTC could open any file the server can; run "
        "the server with --allow-unconfined-compile to compile without it");
  }
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
  const std::uint64_t read_dir =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  for (const std::string& dir : paths.read_dirs) {
    if (absl::Status s = AddReadRule(ruleset.get(), dir, read_dir); !s.ok()) return s;
  }
  for (const std::string& file : paths.read_files) {
    if (absl::Status s = AddReadRule(ruleset.get(), file, LANDLOCK_ACCESS_FS_READ_FILE); !s.ok()) {
      return s;
    }
  }
  if (syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return Errno("landlock_restrict_self");
  }
  return absl::OkStatus();
}

struct SeccompDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

// What a compiler never needs and an escape would: the network, other programs, other
// processes' memory, the mount table, namespaces, the kernel's keyrings, BPF, io_uring
// (which would run socket calls this filter never sees).
constexpr const char* kDeniedSyscalls[] = {"socket",
                                           "socketpair",
                                           "connect",
                                           "bind",
                                           "listen",
                                           "accept",
                                           "accept4",
                                           "execve",
                                           "execveat",
                                           "fork",
                                           "vfork",
                                           "ptrace",
                                           "process_vm_readv",
                                           "process_vm_writev",
                                           "mount",
                                           "umount2",
                                           "pivot_root",
                                           "chroot",
                                           "unshare",
                                           "setns",
                                           "keyctl",
                                           "add_key",
                                           "request_key",
                                           "bpf",
                                           "perf_event_open",
                                           "userfaultfd",
                                           "io_uring_setup",
                                           "init_module",
                                           "finit_module",
                                           "delete_module",
                                           "kexec_load",
                                           "open_by_handle_at",
                                           "name_to_handle_at",
                                           "fsopen",
                                           "fsmount",
                                           "move_mount",
                                           "open_tree",
                                           "mount_setattr",
                                           "personality"};

absl::Status DenyListedSyscalls(scmp_filter_ctx ctx, std::uint32_t deny) {
  for (const char* name : kDeniedSyscalls) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (seccomp_rule_add(ctx, deny, nr, 0) != 0) {
      return absl::InternalError(absl::StrCat("compile jail: seccomp rule for ", name));
    }
  }
  return absl::OkStatus();
}

// clone: threads only. A new process (fork is clone without CLONE_THREAD in glibc) or a
// namespace flag is refused. clone3 passes its flags in memory a filter cannot read:
// ENOSYS, so that the C library falls back to clone.
absl::Status DenyNewProcesses(scmp_filter_ctx ctx, std::uint32_t deny) {
  const std::uint64_t namespaces = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                                   CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;
  if (seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)) != 0) {
    return absl::InternalError("compile jail: seccomp rule for clone");
  }
  for (std::uint64_t bit = 1; bit != 0; bit <<= 1) {
    if ((namespaces & bit) == 0) continue;
    const scmp_arg_cmp has_flag = SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit);
    if (seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1, has_flag) != 0) {
      return absl::InternalError("compile jail: seccomp rule for clone");
    }
  }
  if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0) {
    return absl::InternalError("compile jail: seccomp rule for clone3");
  }
  return absl::OkStatus();
}

absl::Status FilterSyscalls() {
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
    return absl::FailedPreconditionError(
        "compile jail: this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER); run the "
        "server with --allow-unconfined-compile to compile without them");
  }
  std::unique_ptr<void, SeccompDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (ctx == nullptr) return absl::InternalError("compile jail: seccomp_init failed");
  const std::uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  if (absl::Status s = DenyListedSyscalls(ctx.get(), deny); !s.ok()) return s;
  if (absl::Status s = DenyNewProcesses(ctx.get(), deny); !s.ok()) return s;
  if (const int rc = seccomp_load(ctx.get()); rc != 0) {
    return absl::InternalError(absl::StrCat("compile jail: seccomp_load: ", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

}  // namespace

int LandlockAbiVersion() {
  const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

CompileJailPaths DefaultCompileJailPaths(const std::vector<std::string>& library_dirs) {
  CompileJailPaths p;
  p.read_dirs = library_dirs;
  for (const char* dir : {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"}) {
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) p.read_dirs.emplace_back(dir);
  }
  p.read_files = {"/etc/ld.so.cache"};
  return p;
}

absl::Status EnterCompileJail(const CompileJailPaths& paths, bool allow_unconfined) {
  if (absl::Status s = SetLimits(); !s.ok()) return s;
  // Landlock and an unprivileged seccomp filter both need it; it also makes set-uid binaries
  // inert, should anything ever get to exec one.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("PR_SET_NO_NEW_PRIVS");
  auto missing_allowed = [allow_unconfined](const absl::Status& s) {
    return allow_unconfined && absl::IsFailedPrecondition(s);
  };
  if (absl::Status s = RestrictFilesystem(paths); !s.ok() && !missing_allowed(s)) return s;
  if (absl::Status s = FilterSyscalls(); !s.ok() && !missing_allowed(s)) return s;
  return absl::OkStatus();
}

}  // namespace kerneleval::server::submissions
