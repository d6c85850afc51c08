#include "server/submissions/compile_jail_seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace kerneleval::server::submissions {
namespace {

struct SeccompDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

// Every syscall that opens a path, tells whether one exists, or changes one. After the
// warm-up NVRTC needs none of them (it probes "submission.cu" and the header names with
// stat, and a missing answer is what it gets without a jail too), so all answer ENOENT: an
// #include of /etc/shadow reads as a missing file, and so does __has_include, whatever
// exists. The stat family is banned only in its path form; see AddStatRules.
constexpr const char* kPathSyscalls[] = {"open",
                                         "openat",
                                         "openat2",
                                         "creat",
                                         "open_by_handle_at",
                                         "name_to_handle_at",
                                         "open_tree",
                                         "fspick",
                                         "stat",
                                         "lstat",
                                         "access",
                                         "faccessat",
                                         "faccessat2",
                                         "readlink",
                                         "readlinkat",
                                         "statfs",
                                         "statfs64",
                                         "getxattr",
                                         "lgetxattr",
                                         "listxattr",
                                         "llistxattr",
                                         "setxattr",
                                         "lsetxattr",
                                         "removexattr",
                                         "lremovexattr",
                                         "inotify_add_watch",
                                         "fanotify_mark",
                                         "uselib",
                                         "chdir",
                                         "mkdir",
                                         "mkdirat",
                                         "rmdir",
                                         "unlink",
                                         "unlinkat",
                                         "rename",
                                         "renameat",
                                         "renameat2",
                                         "link",
                                         "linkat",
                                         "symlink",
                                         "symlinkat",
                                         "mknod",
                                         "mknodat",
                                         "chmod",
                                         "fchmodat",
                                         "fchmodat2",
                                         "chown",
                                         "lchown",
                                         "fchownat",
                                         "truncate",
                                         "utime",
                                         "utimes",
                                         "utimensat",
                                         "futimesat",
                                         "swapon",
                                         "swapoff",
                                         "acct",
                                         "quotactl",
                                         "lookup_dcookie"};

// Path syscalls newer than Debian 12's libseccomp knows by name. Since Linux 5.1 a new
// syscall has one number on x86_64 and aarch64 alike.
constexpr struct {
  const char* name;
  int nr;
} kNewPathSyscalls[] = {{"setxattrat", 463},    {"getxattrat", 464},     {"listxattrat", 465},
                        {"removexattrat", 466}, {"open_tree_attr", 467}, {"file_getattr", 468},
                        {"file_setattr", 469}};
// Numbers past the newest above (and below x32's 512) answer ENOSYS: a syscall added later,
// which this list cannot name, is unknown to the jail rather than allowed by it.
constexpr int kFirstUnknownSyscall = 470;
constexpr int kLastUnknownSyscall = 511;

// What a compiler never needs and an escape would: the network, other programs, other
// processes' memory and descriptors, the mount table, namespaces, the kernel's keyrings,
// BPF, io_uring (which would run calls this filter never sees).
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
                                           "pidfd_open",
                                           "pidfd_getfd",
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
                                           "fsopen",
                                           "fsmount",
                                           "move_mount",
                                           "mount_setattr",
                                           "personality"};

bool NewSyscallNumbersAreShared() {
  const std::uint32_t arch = seccomp_arch_native();
  return arch == SCMP_ARCH_X86_64 || arch == SCMP_ARCH_AARCH64;
}

absl::Status AddRule(scmp_filter_ctx ctx, std::uint32_t action, int nr, absl::string_view name,
                     unsigned arg_count = 0, scmp_arg_cmp arg = {}) {
  const int rc = arg_count == 0 ? seccomp_rule_add(ctx, action, nr, 0)
                                : seccomp_rule_add(ctx, action, nr, 1, arg);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("compile jail: seccomp rule for ", name, ": ", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

absl::Status AddNamedRules(scmp_filter_ctx ctx, std::uint32_t action,
                           absl::Span<const char* const> names) {
  for (const char* name : names) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (absl::Status s = AddRule(ctx, action, nr, name); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// fstat is newfstatat(fd, "", buf, AT_EMPTY_PATH) in glibc, and statx may come in the same
// form: without AT_EMPTY_PATH the call names a path, and is banned. (With it and a path that
// is not empty the kernel would resolve the path: only code that forges the call gets there,
// not a compiler reading a source.)
absl::Status AddStatRules(scmp_filter_ctx ctx, std::uint32_t action) {
  const int newfstatat = seccomp_syscall_resolve_name("newfstatat");
  if (newfstatat != __NR_SCMP_ERROR) {
    if (absl::Status s = AddRule(ctx, action, newfstatat, "newfstatat", 1,
                                 SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, 0));
        !s.ok()) {
      return s;
    }
  }
  return AddRule(ctx, action, SCMP_SYS(statx), "statx", 1,
                 SCMP_A2(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, 0));
}

absl::Status BanPaths(scmp_filter_ctx ctx) {
  const std::uint32_t missing = SCMP_ACT_ERRNO(ENOENT);
  if (absl::Status s = AddNamedRules(ctx, missing, kPathSyscalls); !s.ok()) return s;
  if (absl::Status s = AddStatRules(ctx, missing); !s.ok()) return s;
  if (!NewSyscallNumbersAreShared()) return absl::OkStatus();
  for (const auto& n : kNewPathSyscalls) {
    if (seccomp_syscall_resolve_name(n.name) != __NR_SCMP_ERROR) continue;  // named above
    if (absl::Status s = AddRule(ctx, missing, n.nr, n.name); !s.ok()) return s;
  }
  for (int nr = kFirstUnknownSyscall; nr <= kLastUnknownSyscall; ++nr) {
    if (absl::Status s = AddRule(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, "an unknown syscall"); !s.ok()) {
      return s;
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
  if (absl::Status s = AddRule(ctx, deny, SCMP_SYS(clone), "clone", 1,
                               SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
      !s.ok()) {
    return s;
  }
  for (std::uint64_t bit = 1; bit != 0; bit <<= 1) {
    if ((namespaces & bit) == 0) continue;
    if (absl::Status s =
            AddRule(ctx, deny, SCMP_SYS(clone), "clone", 1, SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
        !s.ok()) {
      return s;
    }
  }
  return AddRule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), "clone3");
}

}  // namespace

bool SeccompFiltersAvailable() {
  // Asking whether the kernel knows an action needs the seccomp syscall with filter support.
  std::uint32_t action = SECCOMP_RET_ERRNO;
  return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

absl::Status LoadCompileSeccompFilter() {
  if (!SeccompFiltersAvailable()) {
    return absl::FailedPreconditionError(
        "compile jail: this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER), so nothing "
        "keeps NVRTC from opening files; run the server with --allow-unconfined-compile to "
        "compile without them");
  }
  std::unique_ptr<void, SeccompDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (ctx == nullptr) return absl::InternalError("compile jail: seccomp_init failed");
  // Every thread, should a library have started one before the jail.
  if (seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1) != 0) {
    return absl::InternalError("compile jail: seccomp thread synchronisation");
  }
  if (absl::Status s = BanPaths(ctx.get()); !s.ok()) return s;
  const std::uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  if (absl::Status s = AddNamedRules(ctx.get(), deny, kDeniedSyscalls); !s.ok()) return s;
  if (absl::Status s = DenyNewProcesses(ctx.get(), deny); !s.ok()) return s;
  if (const int rc = seccomp_load(ctx.get()); rc != 0) {
    return absl::InternalError(absl::StrCat("compile jail: seccomp_load: ", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

}  // namespace kerneleval::server::submissions
