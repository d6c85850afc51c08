// Compiles one submission to a cubin: CUDA C++ with NVRTC, PTX with nvJitLink. Runs only
// inside kerneleval-compile, a process of its own with resource limits (compiler.h); the
// server never loads NVRTC or user code.
#pragma once

#include <string>

#include "kerneleval/internal/compile.pb.h"
#include "server/submissions/compile_headers.h"

namespace kerneleval::server::submissions {

// Largest source the compiler takes at all; the service's own limit is lower.
inline constexpr std::size_t kMaxCompileSourceBytes = 4 << 20;

// Checks the request again (arch, includes, defines, entries), compiles, and fills the
// answer: code 0 with the cubin and the diagnostics (ptxas figures per entry, in the order of
// `entries`), or INVALID_ARGUMENT naming the field, with NVRTC's log for a compile error.
// `headers` are the only files NVRTC can include (the ABI header and LoadAllowedHeaders()),
// given from memory; NVRTC gets no include path.
internal::CompileResponse CompileSubmission(const internal::CompileRequest& request,
                                            const HeaderSet& headers);

}  // namespace kerneleval::server::submissions
