#include "client/submit_client.h"

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/param_args.h"
#include "client/text_table.h"
#include "common/enum_names.h"

namespace kerneleval::client {
namespace {

// A flag given once applies to every kernel; else once per kernel.
absl::StatusOr<uint32_t> PerKernel(const std::vector<uint32_t>& values, std::size_t i,
                                   std::size_t kernels, const char* flag, bool required) {
  if (values.empty()) {
    if (required) return absl::InvalidArgumentError(absl::StrCat(flag, ": required"));
    return 0u;
  }
  if (values.size() == 1) return values[0];
  if (values.size() != kernels) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": given ", values.size(), " times for ",
                                                   kernels,
                                                   " kernels; give it once or once per --entry"));
  }
  return values[i];
}

}  // namespace

SubmissionsClient::SubmissionsClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)), stub_(v1::Submissions::NewStub(channel)) {}

std::unique_ptr<grpc::ClientContext> SubmissionsClient::NewContext() const {
  return NewCallContext(options_);
}

grpc::Status SubmissionsClient::Register(const v1::SubmissionSpec& spec,
                                         v1::RegisterSubmissionResponse* response,
                                         bool compile_error_in_response) const {
  v1::RegisterSubmissionRequest request;
  *request.mutable_submission() = spec;
  request.set_compile_error_in_response(compile_error_in_response);
  return stub_->RegisterSubmission(NewContext().get(), request, response);
}

grpc::Status SubmissionsClient::List(v1::ListSubmissionsResponse* response) const {
  response->Clear();
  v1::ListSubmissionsRequest request;
  for (;;) {
    v1::ListSubmissionsResponse page;
    if (grpc::Status s = stub_->ListSubmissions(NewContext().get(), request, &page); !s.ok()) {
      return s;
    }
    for (v1::Submission& sub : *page.mutable_submissions()) {
      *response->add_submissions() = std::move(sub);
    }
    // A token that does not move on would loop for ever: the pages end there.
    if (page.next_page_token().empty() || page.next_page_token() == request.page_token()) {
      return grpc::Status::OK;
    }
    request.set_page_token(page.next_page_token());
  }
}

grpc::Status SubmissionsClient::Get(const std::string& id_or_name,
                                    v1::GetSubmissionResponse* response) const {
  v1::GetSubmissionRequest request;
  request.set_submission(id_or_name);
  return stub_->GetSubmission(NewContext().get(), request, response);
}

grpc::Status SubmissionsClient::Delete(const std::string& id_or_name,
                                       v1::DeleteSubmissionResponse* response) const {
  v1::DeleteSubmissionRequest request;
  request.set_submission(id_or_name);
  return stub_->DeleteSubmission(NewContext().get(), request, response);
}

absl::StatusOr<v1::SubmissionSpec> BuildSubmissionSpec(const SubmitSpec& f) {
  v1::SubmissionSpec spec;
  std::ifstream in(f.source_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--source: cannot read '", f.source_path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  spec.set_source(text.str());
  spec.set_language(f.ptx || absl::EndsWith(f.source_path, ".ptx") ? v1::SOURCE_LANGUAGE_PTX
                                                                   : v1::SOURCE_LANGUAGE_CUDA);
  spec.set_name(f.name);
  spec.set_description(f.description);
  if (f.entries.empty()) return absl::InvalidArgumentError("--entry: required");
  if (f.rows_per_block.empty() == f.ctas_per_sm.empty() && f.entries.size() == 1) {
    return absl::InvalidArgumentError("give --rows-per-block or --ctas-per-sm");
  }
  v1::LaunchPlan* plan = spec.mutable_launch_plan();
  plan->set_needs_scratch(f.needs_scratch);
  for (std::size_t i = 0; i < f.entries.size(); ++i) {
    v1::KernelLaunch* k = plan->add_kernels();
    k->set_entry(f.entries[i]);
    absl::StatusOr<uint32_t> block = PerKernel(f.block_sizes, i, f.entries.size(), "--block", true);
    if (!block.ok()) return block.status();
    k->set_block_size(*block);
    // Per kernel: --rows-per-block where given for it, else --ctas-per-sm.
    const bool rows = f.rows_per_block.size() == 1 || i < f.rows_per_block.size();
    if (rows && !f.rows_per_block.empty()) {
      absl::StatusOr<uint32_t> r =
          PerKernel(f.rows_per_block, i, f.entries.size(), "--rows-per-block", true);
      if (!r.ok()) return r.status();
      k->set_rows_per_block(*r);
    } else {
      absl::StatusOr<uint32_t> c =
          PerKernel(f.ctas_per_sm, i, f.entries.size(), "--ctas-per-sm", true);
      if (!c.ok()) return c.status();
      k->set_ctas_per_sm(*c);
    }
    absl::StatusOr<uint32_t> smem =
        PerKernel(f.dynamic_smem_bytes, i, f.entries.size(), "--smem", false);
    if (!smem.ok()) return smem.status();
    k->set_dynamic_smem_bytes(*smem);
    if (f.cluster_x > 1) k->mutable_cluster()->set_x(f.cluster_x);
    k->set_pdl(f.pdl);
  }
  for (const std::string& text : f.args) {
    absl::StatusOr<ParsedParamArg> arg = ParseParamArg(text);
    if (!arg.ok()) return arg.status();
    if (arg->kernel >= plan->kernels_size()) {
      return absl::InvalidArgumentError(absl::StrCat("--arg '", text.substr(0, 48), "': kernel ",
                                                     arg->kernel, " of a plan of ",
                                                     plan->kernels_size()));
    }
    for (int i = 0; i < plan->kernels_size(); ++i) {
      if (arg->kernel < 0 || arg->kernel == i) *plan->mutable_kernels(i)->add_params() = arg->param;
    }
  }
  const std::optional<v1::DType> dtype = ParseDTypeName(f.dtype);
  if (!dtype) return absl::InvalidArgumentError("--dtype: bf16, fp16 or fp32");
  spec.set_dtype(*dtype);
  const std::optional<v1::Mode> mode = ParseModeName(f.mode);
  if (!mode) return absl::InvalidArgumentError("--mode: output, output_and_residual or in_place");
  spec.set_mode(*mode);
  spec.set_target_arch(f.target_arch);
  spec.set_device(f.device);
  spec.mutable_options()->set_fast_math(f.fast_math);
  for (const std::string& d : f.defines) {
    v1::Define* define = spec.mutable_options()->add_defines();
    const std::size_t eq = d.find('=');
    define->set_name(d.substr(0, eq));
    if (eq != std::string::npos) define->set_value(d.substr(eq + 1));
  }
  return spec;
}

std::string FormatSubmission(const v1::Submission& s, bool with_log) {
  const v1::CompileDiagnostics& d = s.diagnostics();
  std::string out = absl::StrCat(
      s.spec().name(), "  ", s.id(), "  (", s.owner(), ")\n", "  ",
      DTypeShortName(s.spec().dtype()), " ", ModeShortName(s.spec().mode()), ", ", d.target_arch(),
      ", NVRTC ", d.nvrtc_version(), ", ", d.cubin_bytes(), " bytes of cubin, ",
      Fixed(d.compile_seconds(), 2), " s", d.cache_hit() ? " (cached)" : "", "\n");
  TextTable table({"kernel", "block", "grid", "registers", "spill st/ld B", "smem static+dyn B",
                   "stack B", "pdl"});
  for (int i = 0; i < d.kernels_size() && i < s.spec().launch_plan().kernels_size(); ++i) {
    const v1::KernelResources& k = d.kernels(i);
    const v1::KernelLaunch& l = s.spec().launch_plan().kernels(i);
    const std::string grid = l.grid_case() == v1::KernelLaunch::kCtasPerSm
                                 ? absl::StrCat(l.ctas_per_sm(), " x SMs")
                                 : absl::StrCat("batch / ", l.rows_per_block());
    table.AddRow({k.entry(), absl::StrCat(l.block_size()), grid, absl::StrCat(k.registers()),
                  absl::StrCat(k.spill_store_bytes(), "/", k.spill_load_bytes()),
                  absl::StrCat(k.static_smem_bytes(), "+", l.dynamic_smem_bytes()),
                  absl::StrCat(k.stack_frame_bytes()), l.pdl() ? "yes" : "no"});
  }
  absl::StrAppend(&out, table.Render());
  for (const v1::KernelLaunch& l : s.spec().launch_plan().kernels()) {
    if (l.params().empty()) continue;
    absl::StrAppend(&out, "  ", l.entry(), " takes ", FormatParamBinding(l), "\n");
  }
  if (with_log && !d.log().empty()) absl::StrAppend(&out, "\nNVRTC log:\n", d.log());
  return out;
}

std::string FormatSubmissionList(const v1::ListSubmissionsResponse& response) {
  TextTable table({"name", "id", "dtype", "mode", "arch", "kernels", "registers"});
  for (const v1::Submission& s : response.submissions()) {
    std::string registers;
    for (const v1::KernelResources& k : s.diagnostics().kernels()) {
      absl::StrAppend(&registers, registers.empty() ? "" : ",", k.registers());
    }
    table.AddRow({s.spec().name(), s.id(), DTypeShortName(s.spec().dtype()),
                  ModeShortName(s.spec().mode()), s.spec().target_arch(),
                  absl::StrCat(s.spec().launch_plan().kernels_size()), registers});
  }
  return table.Render();
}

}  // namespace kerneleval::client
