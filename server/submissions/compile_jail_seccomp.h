// The compile jail's seccomp filter (libseccomp), apart from compile_jail.cc's Landlock and
// rlimits. Two layers in one filter:
//   - the open ban: every syscall that opens, probes or changes a path answers ENOENT, so
//     that no file can be read after NVRTC's warm-up (compile_warmup.h) and an existing
//     file and a missing one look the same. This holds whether or not the kernel has
//     Landlock.
//   - the syscall filter: no sockets, exec, new processes, ptrace, mounts, namespaces,
//     keyrings, BPF, io_uring (EPERM), and syscalls newer than this filter knows (ENOSYS).
#pragma once

#include "absl/status/status.h"

namespace kerneleval::server::submissions {

// Whether the kernel takes seccomp filters (CONFIG_SECCOMP_FILTER).
bool SeccompFiltersAvailable();

// Loads the filter for every thread of the process, for good. FAILED_PRECONDITION where the
// kernel has no seccomp filters; INTERNAL where building or loading the filter fails.
absl::Status LoadCompileSeccompFilter();

}  // namespace kerneleval::server::submissions
