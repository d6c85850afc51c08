// The compile jail: what confines a kerneleval-compile process once NVRTC is loaded and the
// request and headers are in memory. Lexing the source is no boundary (a raw string hides a
// directive from any filter short of a C++ preprocessor, and NVRTC opens an absolute
// #include from the filesystem whatever its options say), so the OS stops what the compiler
// might be talked into:
//   - Landlock: the filesystem is read-only and limited to the directories named here (the
//     shared libraries NVRTC loads, e.g. its builtins library at the first compile); every
//     other path, /etc/passwd or a file the caller planted, is denied to open, list or write.
//   - seccomp (libseccomp): no sockets, no exec, no ptrace, no mounts, no namespaces, no new
//     processes; such calls fail with EPERM (the compile fails; nothing is killed).
//   - rlimits: no core files, no new processes, a handful of descriptors.
// The caller clears the environment first (clearenv) and passes what the tool needs in argv.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kerneleval::server::submissions {

struct CompileJailPaths {
  // Directories (and everything below) that stay readable and mappable: libraries only.
  std::vector<std::string> read_dirs;
  // Single files that stay readable (the dynamic loader's cache).
  std::vector<std::string> read_files;
};

// The Landlock ABI version of the running kernel; 0 where Landlock is absent or disabled.
int LandlockAbiVersion();

// read_dirs: `library_dirs` (NVRTC's own directory, resolved by the caller) and the system
// library directories that exist; read_files: /etc/ld.so.cache.
CompileJailPaths DefaultCompileJailPaths(const std::vector<std::string>& library_dirs);

// Confines the calling process for good: rlimits, no_new_privs, Landlock, seccomp, in that
// order. FAILED_PRECONDITION naming what is missing where the kernel has no Landlock or
// seccomp, unless `allow_unconfined` (--allow-unconfined-compile), which skips what is
// missing and applies the rest; INTERNAL where a step fails. Call it single-threaded, after
// every file the process needs outside `paths` is open or read.
absl::Status EnterCompileJail(const CompileJailPaths& paths, bool allow_unconfined = false);

}  // namespace kerneleval::server::submissions
