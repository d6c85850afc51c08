// NVRTC's warm-up before the compile jail: what NVRTC and nvJitLink load at their first call
// (the builtins library, libnvrtc-builtins, dlopen'ed at the first compile; their own
// lookups of the CUDA driver) is loaded by compiling a program of no interest, so that the
// submission's compile, inside the jail, opens no file at all and the jail can refuse every
// open (compile_jail_seccomp.h).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace kerneleval::server::submissions {

// Compiles an empty kernel for `arch` (sm_90a where `arch` is not one the service takes)
// with NVRTC, and with `link_ptx` also links its PTX with nvJitLink, as a PTX submission
// is. INTERNAL where either fails: the jail would then refuse what they still need.
absl::Status WarmUpCompiler(const std::string& arch, bool fast_math, bool link_ptx);

}  // namespace kerneleval::server::submissions
