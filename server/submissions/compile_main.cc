// kerneleval-compile: compiles one submission and exits. The server starts one per compile
// (compiler.h) with limits on address space, CPU time and file size, writes a
// kerneleval.internal.CompileRequest to stdin and reads a CompileResponse from stdout.
//
// What it runs with, in order: an empty environment (cleared before anything else reads
// it); the request and the allowed headers read into memory; then the compile jail
// (compile_jail.h: Landlock, seccomp, rlimits) before NVRTC sees the source. NVRTC writes no
// file, so the jail grants no writable directory at all.
//
//   kerneleval-compile [--cuda-include-dir DIR] [--allow-unconfined-compile]
#include <dlfcn.h>
#include <nvrtc.h>
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
#include "server/submissions/nvrtc_compile.h"

namespace {

namespace subs = kerneleval::server::submissions;

// The directory NVRTC was loaded from (its builtins library is opened from there, or from
// the same directory under another name, at the first compile).
std::vector<std::string> NvrtcLibraryDirs() {
  std::vector<std::string> dirs;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    const std::filesystem::path lib(info.dli_fname);
    dirs.push_back(lib.parent_path().string());
    const std::filesystem::path real = std::filesystem::canonical(lib, ec);
    if (!ec) dirs.push_back(real.parent_path().string());
  }
  return dirs;
}

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
  // No working directory to read: relative paths lead nowhere the jail allows.
  if (chdir("/") != 0) return Failure(absl::StatusCode::kInternal, "kerneleval-compile: chdir");
  if (absl::Status s = subs::EnterCompileJail(subs::DefaultCompileJailPaths(NvrtcLibraryDirs()),
                                              allow_unconfined);
      !s.ok()) {
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
