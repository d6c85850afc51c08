// How submitted sources are compiled: the kerneleval-compile tool, its limits and what its
// output must satisfy. Apart from compiler.h so that the tool's process (compile_tool_process.h)
// need not include the compiler that starts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/submissions/module_limits.h"

namespace kerneleval::server::submissions {

struct CompilerOptions {
  std::string tool_path;         // the kerneleval-compile executable
  std::string cuda_include_dir;  // passed on; empty: the one the tool was built with
  double wall_seconds = 60;      // killed after this long (DEADLINE_EXCEEDED)
  int cpu_seconds = 30;          // RLIMIT_CPU (DEADLINE_EXCEEDED)
  // RLIMIT_AS. NVRTC compiles a kernel that includes cuda_bf16.h in ~75 MB resident; the
  // CUDA libraries map far more address space than that.
  std::uint64_t address_space_bytes = std::uint64_t{4} << 30;
  std::uint64_t max_output_bytes = std::uint64_t{64} << 20;  // a larger answer is refused
  std::size_t cache_bytes = std::size_t{256} << 20;          // cubins kept, least recent out
  // Compile where the kernel has no seccomp filters (compile_jail.h) instead of refusing
  // with FAILED_PRECONDITION: --allow-unconfined-compile. A kernel without Landlock needs
  // none of it.
  bool allow_unconfined = false;
  ModuleLimits module_limits;  // checked on every compiled cubin before it is returned
  // The tool's only environment variable, LD_LIBRARY_PATH (the server's own, set in main):
  // a relocated bundle's libraries are found; tokens, database URLs and proxies stay behind.
  std::string library_path;
};

}  // namespace kerneleval::server::submissions
