#include "server/submissions/compile_warmup.h"

#include <nvJitLink.h>
#include <nvrtc.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
struct LinkDeleter {
  void operator()(nvJitLinkHandle h) const { nvJitLinkDestroy(&h); }
};

constexpr char kWarmUpSource[] = "extern \"C\" __global__ void kerneleval_warm_up() {}\n";

// The PTX of kWarmUpSource, compiled with the options of a submission of `arch`.
absl::StatusOr<std::string> CompileWarmUp(const std::string& arch, bool fast_math) {
  nvrtcProgram raw = nullptr;
  if (nvrtcCreateProgram(&raw, kWarmUpSource, kSourceName, 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    return absl::InternalError("kerneleval-compile: warm-up: nvrtcCreateProgram failed");
  }
  std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter> program(raw);
  const std::vector<std::string> options = NvrtcOptions(arch, fast_math, {}, "");
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult rc =
      nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  if (rc != NVRTC_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("kerneleval-compile: warm-up compile: ", nvrtcGetErrorString(rc)));
  }
  std::size_t size = 0;
  nvrtcGetPTXSize(program.get(), &size);
  std::string ptx(size, '\0');
  if (size > 0) nvrtcGetPTX(program.get(), ptx.data());
  return ptx;
}

// Links `ptx` with the options CompileSubmission gives nvJitLink.
absl::Status LinkWarmUp(const std::string& arch, const std::string& ptx) {
  const std::string arch_option = absl::StrCat("-arch=", arch);
  std::vector<const char*> options = {arch_option.c_str(), "-verbose", "-lineinfo", "-O3"};
  nvJitLinkHandle raw = nullptr;
  if (nvJitLinkCreate(&raw, static_cast<std::uint32_t>(options.size()), options.data()) !=
      NVJITLINK_SUCCESS) {
    return absl::InternalError("kerneleval-compile: warm-up: nvJitLinkCreate failed");
  }
  std::unique_ptr<std::remove_pointer_t<nvJitLinkHandle>, LinkDeleter> link(raw);
  if (nvJitLinkAddData(link.get(), NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), "warm_up.ptx") !=
          NVJITLINK_SUCCESS ||
      nvJitLinkComplete(link.get()) != NVJITLINK_SUCCESS) {
    return absl::InternalError("kerneleval-compile: warm-up link failed");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WarmUpCompiler(const std::string& arch, bool fast_math, bool link_ptx) {
  const std::string target = IsSupportedArch(arch) ? arch : "sm_90a";
  absl::StatusOr<std::string> ptx = CompileWarmUp(target, fast_math);
  if (!ptx.ok()) return ptx.status();
  return link_ptx ? LinkWarmUp(target, *ptx) : absl::OkStatus();
}

}  // namespace kerneleval::server::submissions
