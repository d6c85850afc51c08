#include "server/submissions/nvrtc_compile.h"

#include <nvJitLink.h>
#include <nvrtc.h>

#include <chrono>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/submissions/compile_output.h"
#include "server/submissions/ptx_code.h"
#include "server/submissions/source_rules.h"
#include "submission_abi_text.h"

namespace kerneleval::server::submissions {
namespace {

internal::CompileResponse Fail(absl::StatusCode code, std::string message, std::string log = "") {
  internal::CompileResponse r;
  r.set_code(static_cast<int>(code));
  r.set_message(std::move(message));
  r.mutable_diagnostics()->set_log(std::move(log));
  return r;
}

internal::CompileResponse Fail(const absl::Status& s, std::string log = "") {
  return Fail(s.code(), std::string(s.message()), std::move(log));
}

absl::Status CheckRequest(const internal::CompileRequest& req) {
  if (!IsSupportedArch(req.arch())) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission.target_arch: ", Quote(req.arch()), " is not sm_90a or sm_100a"));
  }
  if (req.source().empty()) {
    return absl::InvalidArgumentError("submission.source: empty");
  }
  if (req.source().size() > kMaxCompileSourceBytes) {
    return absl::InvalidArgumentError(absl::StrCat("submission.source: ", req.source().size(),
                                                   " bytes; at most ", kMaxCompileSourceBytes));
  }
  if (req.entries().empty()) {
    return absl::InvalidArgumentError("submission.launch_plan.kernels: no entry to compile");
  }
  for (int i = 0; i < req.entries_size(); ++i) {
    if (absl::Status s = CheckEntry(req.entries(i),
                                    absl::StrCat("submission.launch_plan.kernels[", i, "].entry"));
        !s.ok()) {
      return s;
    }
  }
  if (req.language() == v1::SOURCE_LANGUAGE_PTX) return absl::OkStatus();
  if (absl::Status s = CheckIncludes(req.source(), "submission.source"); !s.ok()) return s;
  return CheckDefines(req.defines(), "submission.options.defines");
}

// Fills the per-entry figures in plan order from the ptxas lines of `log`, the size of each
// parameter of each entry of `ptx` (the server checks them against the plan's binding), and
// whether each entry can wait for its grid dependency (a `pdl` launch needs it).
absl::Status FillResources(const internal::CompileRequest& req,
                           const std::vector<std::string>& lowered, const std::string& log,
                           absl::string_view ptx, v1::CompileDiagnostics* d) {
  const auto figures = ParsePtxasInfo(log);
  for (int i = 0; i < req.entries_size(); ++i) {
    const auto params = PtxEntryParamBytes(ptx, lowered[i]);
    if (!params.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("submission.launch_plan.kernels[", i, "].entry: ", Quote(req.entries(i)),
                       " is not a __global__ function of the source"));
    }
    const auto it = figures.find(lowered[i]);
    if (it == figures.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "submission.launch_plan.kernels[", i, "].entry: ", Quote(req.entries(i)),
          " was not compiled as a kernel (no ptxas figures for ", Quote(lowered[i]), ")"));
    }
    v1::KernelResources* k = d->add_kernels();
    *k = it->second;
    k->set_entry(req.entries(i));
    k->set_waits_for_grid_dependency(PtxEntryWaitsForGrid(ptx, lowered[i]).value_or(false));
    for (const long long bytes : *params) k->add_param_bytes(bytes);
  }
  return absl::OkStatus();
}

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

struct LinkDeleter {
  void operator()(nvJitLinkHandle h) const { nvJitLinkDestroy(&h); }
};
using Link = std::unique_ptr<std::remove_pointer_t<nvJitLinkHandle>, LinkDeleter>;

// A program of the source with the ABI header and `headers`, each entry added as a name
// expression so that its lowered name can be asked for.
absl::StatusOr<Program> NewProgram(const internal::CompileRequest& req, const HeaderSet& headers) {
  nvrtcProgram raw = nullptr;
  std::vector<const char*> header_texts = {kSubmissionAbiText};
  std::vector<const char*> header_names = {kAbiInclude};
  for (std::size_t i = 0; i < headers.names.size(); ++i) {
    header_texts.push_back(headers.texts[i].c_str());
    header_names.push_back(headers.names[i].c_str());
  }
  nvrtcResult rc = nvrtcCreateProgram(&raw, req.source().c_str(), kSourceName,
                                      static_cast<int>(header_names.size()), header_texts.data(),
                                      header_names.data());
  if (rc != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvrtcCreateProgram: ", nvrtcGetErrorString(rc)));
  }
  Program program(raw);
  for (const std::string& entry : req.entries()) {
    rc = nvrtcAddNameExpression(program.get(), entry.c_str());
    if (rc != NVRTC_SUCCESS) {
      return absl::InternalError(absl::StrCat("nvrtcAddNameExpression: ", nvrtcGetErrorString(rc)));
    }
  }
  return program;
}

std::string ProgramLog(nvrtcProgram program) {
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

// nvrtcCompileProgram's result as the caller sees it: the source's fault, memory, or ours.
absl::Status CompileStatus(nvrtcResult rc) {
  if (rc == NVRTC_ERROR_COMPILATION || rc == NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID) {
    return absl::InvalidArgumentError(absl::StrCat("submission.source: compilation failed (",
                                                   nvrtcGetErrorString(rc), "); the log follows"));
  }
  if (rc != NVRTC_SUCCESS) {
    return absl::Status(rc == NVRTC_ERROR_OUT_OF_MEMORY ? absl::StatusCode::kResourceExhausted
                                                        : absl::StatusCode::kInternal,
                        absl::StrCat("nvrtcCompileProgram: ", nvrtcGetErrorString(rc)));
  }
  return absl::OkStatus();
}

// The mangled name of each entry, in plan order.
absl::StatusOr<std::vector<std::string>> LoweredNames(nvrtcProgram program,
                                                      const internal::CompileRequest& req) {
  std::vector<std::string> lowered;
  for (int i = 0; i < req.entries_size(); ++i) {
    const char* name = nullptr;
    if (nvrtcGetLoweredName(program, req.entries(i).c_str(), &name) != NVRTC_SUCCESS ||
        name == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("submission.launch_plan.kernels[", i,
                                                     "].entry: ", Quote(req.entries(i)),
                                                     " names no __global__ function"));
    }
    lowered.emplace_back(name);
  }
  return lowered;
}

std::string ProgramPtx(nvrtcProgram program) {
  std::size_t ptx_size = 0;
  std::string ptx;
  if (nvrtcGetPTXSize(program, &ptx_size) == NVRTC_SUCCESS) {
    ptx.resize(ptx_size);
    nvrtcGetPTX(program, ptx.data());
  }
  return ptx;
}

// The answer of a build that produced `cubin`: the entries' figures, the options, the log.
internal::CompileResponse Compiled(std::string cubin, const internal::CompileRequest& req,
                                   const std::vector<std::string>& lowered, const std::string& log,
                                   absl::string_view ptx, const std::vector<std::string>& options) {
  internal::CompileResponse response;
  *response.mutable_cubin() = std::move(cubin);
  v1::CompileDiagnostics* d = response.mutable_diagnostics();
  if (absl::Status s = FillResources(req, lowered, log, ptx, d); !s.ok()) return Fail(s, log);
  for (const std::string& o : options) d->add_options(o);
  d->set_log(log);
  return response;
}

internal::CompileResponse CompileCuda(const internal::CompileRequest& req,
                                      const HeaderSet& headers) {
  const std::vector<std::string> options =
      NvrtcOptions(req.arch(), req.fast_math(), req.defines(), /*cuda_include_dir=*/"");
  absl::StatusOr<Program> program = NewProgram(req, headers);
  if (!program.ok()) return Fail(program.status());
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult rc =
      nvrtcCompileProgram(program->get(), static_cast<int>(argv.size()), argv.data());
  const std::string log = ProgramLog(program->get());
  if (absl::Status s = CompileStatus(rc); !s.ok()) return Fail(s, log);
  absl::StatusOr<std::vector<std::string>> lowered = LoweredNames(program->get(), req);
  if (!lowered.ok()) return Fail(lowered.status(), log);
  const std::string ptx = ProgramPtx(program->get());
  std::size_t cubin_size = 0;
  if (nvrtcGetCUBINSize(program->get(), &cubin_size) != NVRTC_SUCCESS || cubin_size == 0) {
    return Fail(absl::StatusCode::kInternal, "NVRTC produced no cubin", log);
  }
  std::string cubin(cubin_size, '\0');
  nvrtcGetCUBIN(program->get(), cubin.data());
  return Compiled(std::move(cubin), req, *lowered, log, ptx, options);
}

internal::CompileResponse CompilePtx(const internal::CompileRequest& req) {
  const std::string arch = absl::StrCat("-arch=", req.arch());
  std::vector<const char*> options = {arch.c_str(), "-verbose", "-lineinfo", "-O3"};
  nvJitLinkHandle raw = nullptr;
  if (nvJitLinkCreate(&raw, static_cast<std::uint32_t>(options.size()), options.data()) !=
      NVJITLINK_SUCCESS) {
    return Fail(absl::StatusCode::kInternal, "nvJitLinkCreate failed");
  }
  Link link(raw);
  const nvJitLinkResult added = nvJitLinkAddData(
      link.get(), NVJITLINK_INPUT_PTX, req.source().data(), req.source().size(), "submission.ptx");
  const nvJitLinkResult done = added == NVJITLINK_SUCCESS ? nvJitLinkComplete(link.get()) : added;
  auto read_log = [&](bool error) {
    std::size_t n = 0;
    (error ? nvJitLinkGetErrorLogSize : nvJitLinkGetInfoLogSize)(link.get(), &n);
    std::string s(n, '\0');
    if (n > 0) (error ? nvJitLinkGetErrorLog : nvJitLinkGetInfoLog)(link.get(), s.data());
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
  };
  const std::string log = absl::StrCat(read_log(true), read_log(false));
  if (done != NVJITLINK_SUCCESS) {
    return Fail(absl::StatusCode::kInvalidArgument,
                "submission.source: PTX assembly failed; the log follows", log);
  }
  const std::vector<std::string> lowered(req.entries().begin(), req.entries().end());
  std::size_t cubin_size = 0;
  nvJitLinkGetLinkedCubinSize(link.get(), &cubin_size);
  std::string cubin(cubin_size, '\0');
  nvJitLinkGetLinkedCubin(link.get(), cubin.data());
  return Compiled(std::move(cubin), req, lowered, log, req.source(),
                  std::vector<std::string>(options.begin(), options.end()));
}

}  // namespace

internal::CompileResponse CompileSubmission(const internal::CompileRequest& request,
                                            const HeaderSet& headers) {
  if (absl::Status s = CheckRequest(request); !s.ok()) {
    return Fail(s);
  }
  const auto start = std::chrono::steady_clock::now();
  internal::CompileResponse response = request.language() == v1::SOURCE_LANGUAGE_PTX
                                           ? CompilePtx(request)
                                           : CompileCuda(request, headers);
  v1::CompileDiagnostics* d = response.mutable_diagnostics();
  d->set_target_arch(request.arch());
  d->set_compile_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS) {
    d->set_nvrtc_version(absl::StrCat(major, ".", minor));
  }
  d->set_cubin_bytes(response.cubin().size());
  return response;
}

}  // namespace kerneleval::server::submissions
