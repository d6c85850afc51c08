// The server's side of compilation: each compile runs in a kerneleval-compile process of its
// own (started per call, never NVRTC in the server), with an address-space limit, a CPU-time
// limit and a wall-clock timeout, so that a source that makes the compiler spin or swell
// costs one child process. Results are cached per owner by (source hash, options, arch): an
// owner never gets another owner's compile from the cache, so neither `cache_hit` nor the
// answer's time tells it what other owners compiled.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "kerneleval/internal/compile.pb.h"
#include "server/submissions/compiler_options.h"
#include "server/submissions/module_limits.h"

namespace kerneleval::server::submissions {

struct CompileResult {
  internal::CompileResponse response;  // code 0: cubin and diagnostics
};

// The status payload of a compile error: its v1.CompileDiagnostics, serialized.
inline constexpr char kCompileDiagnosticsPayload[] =
    "type.googleapis.com/kerneleval.v1.CompileDiagnostics";

class Compiler {
 public:
  explicit Compiler(CompilerOptions options);

  // OK with the cubin and diagnostics, or: INVALID_ARGUMENT naming the field (a compile
  // error's message is the tool's, and its diagnostics, NVRTC's log among them, are the
  // payload kCompileDiagnosticsPayload: a log can be far longer than a status message may be;
  // a log holds only the lines that cite the source itself, SubmissionLogLines, and at most
  // kMaxCompileLogBytes of them, BoundedLog, on success as on error; a cubin over
  // the module limits is refused here, before any GPU loads it); FAILED_PRECONDITION where the
  // compile jail cannot be set up (no seccomp filters, without allow_unconfined);
  // DEADLINE_EXCEEDED past the wall or CPU limit; RESOURCE_EXHAUSTED past the address-space or
  // output limit; INTERNAL when the tool cannot start or crashes. Thread-safe; compiles run
  // concurrently. `owner` is whose compile it is: the cache answers only that owner's own
  // earlier compiles.
  absl::StatusOr<internal::CompileResponse> Compile(const std::string& owner,
                                                    const internal::CompileRequest& request);

  // The content key: SHA-256 over the language, arch, options, entries and source (a
  // submission's id is built on it).
  static std::string CacheKey(const internal::CompileRequest& request);

  const CompilerOptions& options() const { return options_; }

 private:
  absl::StatusOr<internal::CompileResponse> RunTool(const internal::CompileRequest& request);

  const CompilerOptions options_;
  std::mutex mu_;
  std::list<std::pair<std::string, internal::CompileResponse>> lru_;  // front: most recent
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  std::size_t cached_bytes_ = 0;
};

// SHA-256 of `data` as lowercase hex.
std::string Sha256Hex(const std::string& data);

}  // namespace kerneleval::server::submissions
