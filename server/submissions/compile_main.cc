// kerneleval-compile: compiles one submission and exits. The server starts one per compile
// (compiler.h) with limits on address space, CPU time and file size, writes a
// kerneleval.internal.CompileRequest to stdin and reads a CompileResponse from stdout. It
// runs in an empty directory of its own, so that no relative path reaches a file; the only
// headers it serves are the ABI header (from memory) and the toolkit's.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>

#include "server/submissions/nvrtc_compile.h"

namespace {

// An empty directory for NVRTC's working directory, removed at exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kerneleval-compile-XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr && chdir(tmpl.c_str()) == 0) path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string include_dir = KERNELEVAL_CUDA_INCLUDE_DIR;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--cuda-include-dir") include_dir = argv[++i];
  }
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  kerneleval::internal::CompileRequest request;
  kerneleval::internal::CompileResponse response;
  ScratchDir scratch;
  if (input.size() > 2 * kerneleval::server::submissions::kMaxCompileSourceBytes ||
      !request.ParseFromString(input)) {
    response.set_code(3);  // INVALID_ARGUMENT
    response.set_message("kerneleval-compile: the request on stdin does not parse");
  } else if (scratch.path.empty()) {
    response.set_code(13);  // INTERNAL
    response.set_message("kerneleval-compile: cannot create a working directory");
  } else {
    response = kerneleval::server::submissions::CompileSubmission(request, include_dir);
  }
  const std::string out = response.SerializeAsString();
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
