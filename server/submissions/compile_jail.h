// The compile jail: what confines a kerneleval-compile process once NVRTC is loaded and warm
// (compile_warmup.h: its builtins library mapped) and the request and headers are in memory.
// Lexing the source is no boundary (a raw string hides a directive from any filter short of
// a C++ preprocessor, and NVRTC opens an absolute #include from the filesystem whatever its
// options say), so the OS stops what the compiler might be talked into. Layers, each named
// as the server's kerneleval_compile_jail_layer metric names it:
//   - seccomp_open_ban (compile_jail_seccomp.h): every syscall that opens, probes or changes
//     a path answers ENOENT. Nothing is left to open after the warm-up, so no file at all
//     can be read, on any kernel with seccomp filters, Landlock or not.
//   - seccomp_syscalls: no sockets, no exec, no ptrace, no mounts, no namespaces, no new
//     processes (EPERM: the compile fails; nothing is killed).
//   - landlock, where the kernel has it: a ruleset that handles every filesystem right and
//     grants none, so that even a call the seccomp filter missed opens nothing; from ABI 4
//     no TCP, from ABI 6 no abstract sockets or signals out.
//   - rlimits: no core files, no new processes, a handful of descriptors.
// The caller clears the environment first (clearenv) and passes what the tool needs in argv.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kerneleval::server::submissions {

// The Landlock ABI version of the running kernel; 0 where Landlock is absent or disabled.
int LandlockAbiVersion();

// What the running kernel lets the jail apply.
struct CompileJailLayers {
  int landlock_abi = 0;  // 0: no Landlock
  bool seccomp = false;  // seccomp filters: the open ban and the syscall filter

  // (layer, holds) in a fixed order: landlock, seccomp_open_ban, seccomp_syscalls, rlimits.
  std::vector<std::pair<std::string, bool>> Named() const;
  // One line for the server's log: which layers hold, and what a missing one means.
  std::string Describe() const;
};

CompileJailLayers ProbeCompileJailLayers();

// Confines the calling process for good: rlimits, no_new_privs, Landlock where the kernel
// has it, seccomp, in that order. A kernel without Landlock is no error (the open ban holds
// without it). FAILED_PRECONDITION where the kernel has no seccomp filters, unless
// `allow_unconfined` (--allow-unconfined-compile), which applies the rest; INTERNAL where a
// step fails. Call it after every file the process needs is open, mapped or read.
absl::Status EnterCompileJail(bool allow_unconfined = false);

}  // namespace kerneleval::server::submissions
