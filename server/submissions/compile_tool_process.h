// One compile's child process: kerneleval-compile started under CompilerOptions' limits
// (address space, CPU time, file size, no core file, LD_LIBRARY_PATH its only environment),
// fed the request on stdin, its answer read from stdout against a wall-clock deadline and an
// output cap, and the way it ended told apart: an answer, or the limit that stopped it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "kerneleval/internal/compile.pb.h"
#include "server/submissions/compiler_options.h"

namespace kerneleval::server::submissions {

// The tool's answer to `input` (a serialized CompileRequest). DEADLINE_EXCEEDED past the wall
// or CPU limit, RESOURCE_EXHAUSTED past the output limit or on a signal (most likely the
// address-space limit), INTERNAL when the tool cannot start or answers what does not parse.
absl::StatusOr<internal::CompileResponse> RunCompileTool(const CompilerOptions& options,
                                                         const std::string& input);

}  // namespace kerneleval::server::submissions
