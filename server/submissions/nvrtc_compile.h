// Compiles one submission to a cubin: CUDA C++ with NVRTC, PTX with nvJitLink. Runs only
// inside kerneleval-compile, a process of its own with resource limits (compiler.h); the
// server never loads NVRTC or user code.
#pragma once

#include <string>

#include "kerneleval/internal/compile.pb.h"

namespace kerneleval::server::submissions {

// Largest source the compiler takes at all; the service's own limit is lower.
inline constexpr std::size_t kMaxCompileSourceBytes = 4 << 20;

// Checks the request again (arch, includes, defines, entries), compiles, and fills the
// answer: code 0 with the cubin and the diagnostics (ptxas figures per entry, in the order of
// `entries`), or INVALID_ARGUMENT naming the field, with NVRTC's log for a compile error.
// `cuda_include_dir` is the toolkit's include directory (its headers are the only ones a
// source may include besides the ABI header, which is served from memory).
internal::CompileResponse CompileSubmission(const internal::CompileRequest& request,
                                            const std::string& cuda_include_dir);

}  // namespace kerneleval::server::submissions
