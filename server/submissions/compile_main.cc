// kerneleval-compile: compiles one submission and exits. The server starts one per compile
// (compiler.h) with limits on address space, CPU time and file size, writes a
// kerneleval.internal.CompileRequest to stdin and reads a CompileResponse from stdout.
//
// What it runs with, in order: an empty environment (cleared before anything else reads
// it); the request and the allowed headers read into memory; NVRTC warmed up
// (compile_warmup.h) so that everything it loads is loaded; then the compile jail
// (compile_jail.h: no path can be opened any more, seccomp, Landlock where the kernel has
// it, rlimits) before NVRTC sees the source. NVRTC writes no file, so the jail grants no
// directory at all.
//
//   kerneleval-compile [--cuda-include-dir DIR] [--allow-unconfined-compile]
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/submissions/compile_headers.h"
#include "server/submissions/compile_jail.h"
#include "server/submissions/compile_warmup.h"
#include "server/submissions/nvrtc_compile.h"

namespace {

namespace subs = kerneleval::server::submissions;

kerneleval::internal::CompileResponse Failure(absl::StatusCode code, std::string message) {
  kerneleval::internal::CompileResponse r;
  r.set_code(static_cast<int>(code));
  r.set_message(std::move(message));
  return r;
}

kerneleval::internal::CompileResponse Run(const std::string& input, const std::string& include_dir,
                                          bool allow_unconfined) {
  kerneleval::internal::CompileRequest request;
  if (input.size() > 2 * subs::kMaxCompileSourceBytes || !request.ParseFromString(input)) {
    return Failure(absl::StatusCode::kInvalidArgument,
                   "kerneleval-compile: the request on stdin does not parse");
  }
  absl::StatusOr<subs::HeaderSet> headers = subs::LoadAllowedHeaders(
      {include_dir, (std::filesystem::path(include_dir) / "cccl").string()});
  if (!headers.ok()) {
    return Failure(absl::StatusCode::kInternal,
                   absl::StrCat("kerneleval-compile: ", headers.status().message()));
  }
  // No working directory to read: relative paths lead nowhere (and NVRTC's stat of
  // "submission.cu" there is answered ENOENT in the jail, as it is outside).
  if (chdir("/") != 0) return Failure(absl::StatusCode::kInternal, "kerneleval-compile: chdir");
  if (absl::Status s =
          subs::WarmUpCompiler(request.arch(), request.fast_math(),
                               request.language() == kerneleval::v1::SOURCE_LANGUAGE_PTX);
      !s.ok()) {
    return Failure(s.code(), std::string(s.message()));
  }
  if (absl::Status s = subs::EnterCompileJail(allow_unconfined); !s.ok()) {
    return Failure(s.code(), std::string(s.message()));
  }
  return subs::CompileSubmission(request, *headers);
}

}  // namespace

int main(int argc, char** argv) {
  clearenv();  // nothing of the server's environment reaches NVRTC or user code
  std::string include_dir = KERNELEVAL_CUDA_INCLUDE_DIR;
  bool allow_unconfined = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cuda-include-dir" && i + 1 < argc) include_dir = argv[++i];
    if (arg == "--allow-unconfined-compile") allow_unconfined = true;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  const std::string out = Run(input, include_dir, allow_unconfined).SerializeAsString();
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
