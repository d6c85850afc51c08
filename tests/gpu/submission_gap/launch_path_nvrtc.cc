#include "launch_path_nvrtc.h"

#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "server/submissions/cuda_launcher.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::launch_path {

NvrtcBuild CompileLikeTheService(const std::string& source, const std::vector<std::string>& names,
                                 int major, int minor, const std::string& cuda_include,
                                 const std::string& abi_include) {
  auto die = [](const std::string& what) {
    std::fprintf(stderr, "launch_path_bench: %s\n", what.c_str());
    std::exit(1);
  };
  const std::string arch =
      server::submissions::ArchForComputeCapability(absl::StrCat(major, ".", minor));
  if (arch.empty())
    die(absl::StrCat("no submission arch for compute capability ", major, ".", minor));
  nvrtcProgram program = nullptr;
  if (nvrtcCreateProgram(&program, source.c_str(), "launch_path.cu", 0, nullptr, nullptr) !=
      NVRTC_SUCCESS) {
    die("nvrtcCreateProgram failed");
  }
  for (const std::string& n : names) nvrtcAddNameExpression(program, n.c_str());
  const google::protobuf::RepeatedPtrField<v1::Define> no_defines;
  std::vector<std::string> options =
      server::submissions::NvrtcOptions(arch, /*fast_math=*/false, no_defines, cuda_include);
  options.push_back(absl::StrCat("-I", abi_include));
  std::vector<const char*> raw;
  for (const std::string& o : options) raw.push_back(o.c_str());
  const nvrtcResult compiled =
      nvrtcCompileProgram(program, static_cast<int>(raw.size()), raw.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(program, log.data());
  if (compiled != NVRTC_SUCCESS) die(absl::StrCat("NVRTC failed:\n", log));
  NvrtcBuild build;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("registers") != std::string::npos ||
        line.find("Compiling entry") != std::string::npos) {
      absl::StrAppend(&build.resources, "    ", line, "\n");
    }
  }
  for (const std::string& n : names) {
    const char* lowered = nullptr;
    nvrtcGetLoweredName(program, n.c_str(), &lowered);
    build.lowered.push_back(lowered);
  }
  std::size_t size = 0;
  nvrtcGetCUBINSize(program, &size);
  build.cubin.resize(size);
  nvrtcGetCUBIN(program, build.cubin.data());
  nvrtcDestroyProgram(&program);
  return build;
}

kerneleval_params ServiceParams(const FusedAddRmsNormArgs& args, int sm_count) {
  return server::submissions::MakeParams(args, nullptr, 0, sm_count, 0, 1);
}

}  // namespace kerneleval::launch_path
