#include "client/submit_command.h"

#include <iostream>

#include "absl/status/status.h"

#include "client/bench_command.h"
#include "client/cli_output.h"
#include "client/report_format.h"
#include "common/enum_names.h"

namespace kerneleval::client::cli {
namespace {

// bench --suite S --impl <every non-test built-in of the device> --impl <submission id>
// --check-every-call.
int Benchmark(const CliConfig& config, const ClientOptions& options, const std::string& id,
              std::ostream& out, std::ostream& err) {
  std::unique_ptr<KernelEvalClient> client;
  if (grpc::Status s = KernelEvalClient::Create(options, &client); !s.ok()) return RpcError(err, s);
  v1::ListImplementationsResponse impls;
  if (grpc::Status s = client->ListImplementations(config.submit.spec.device, &impls); !s.ok()) {
    return RpcError(err, s);
  }
  CliConfig bench = config;
  bench.command = "bench";
  bench.bench.suite = config.submit.suite;
  bench.bench.device = config.submit.spec.device;
  bench.bench.implementations.clear();
  for (const v1::Implementation& impl : impls.implementations()) {
    if (!impl.test_only() && impl.device_kind() == "cuda") {
      bench.bench.implementations.push_back(impl.name());
    }
  }
  bench.bench.implementations.push_back(id);
  // The built-ins' calls checked as the submission's always are: both sides of the ranking
  // with the same device work between calls (Protocol.check_every_call).
  bench.bench.check_every_call = true;
  bench.bench.profile = config.submit.profile;
  return RunBenchCommand(bench, out, err);
}

// A source that did not compile: the status the call would have answered, then the whole
// NVRTC log (a status message carries only its head), as an RPC error exits.
int CompileFailed(const GlobalFlags& global, const v1::RegisterSubmissionResponse& response,
                  std::ostream& out, std::ostream& err) {
  const v1::CompileError& e = response.compile_error();
  if (global.json) (void)PrintJson(global, out, err, response);
  err << "error: " << absl::StatusCodeToString(static_cast<absl::StatusCode>(e.code())) << ": "
      << e.message() << "\n";
  const std::string& log = e.diagnostics().log();
  if (!log.empty()) {
    err << "NVRTC log:\n" << log << (log.back() == '\n' ? "" : "\n");
  }
  return kExitInfrastructure;
}

}  // namespace

void AddSubmitCommands(CLI::App* app, SubmitFlags* f) {
  CLI::App* submit = app->add_subcommand(
      "submit", "Register a kernel (compiled with NVRTC on the server), optionally benchmark it");
  SubmitSpec* s = &f->spec;
  submit->add_option("--source", s->source_path, "CUDA C++ (.cu) or PTX (.ptx) file")
      ->required()
      ->check(CLI::ExistingFile);
  submit->add_option("--name", s->name, "Name, unique among your submissions")->required();
  submit->add_option("--entry", s->entries, "Kernel name; repeat for a plan of several kernels")
      ->required()
      ->allow_extra_args(false);
  submit->add_option("--block", s->block_sizes, "Threads per CTA (once, or once per --entry)")
      ->required()
      ->allow_extra_args(false);
  auto* rows = submit
                   ->add_option("--rows-per-block", s->rows_per_block,
                                "Grid = ceil(batch / N) (once, or once per --entry)")
                   ->allow_extra_args(false);
  auto* ctas = submit
                   ->add_option("--ctas-per-sm", s->ctas_per_sm,
                                "Persistent grid = N x SMs (once, or once per --entry)")
                   ->allow_extra_args(false);
  rows->excludes(ctas);
  submit->add_option("--smem", s->dynamic_smem_bytes, "Dynamic shared memory bytes per CTA")
      ->allow_extra_args(false);
  submit->add_option("--cluster", s->cluster_x, "CTAs per thread block cluster");
  submit->add_flag("--pdl", s->pdl, "Programmatic dependent launch");
  submit->add_flag("--scratch", s->needs_scratch, "Pass a [batch, hidden] scratch buffer");
  submit->add_flag("--ptx", s->ptx, "The source is PTX (default: by the .ptx extension)");
  submit->add_option("--dtype", s->dtype, "dtype the kernel implements")
      ->check(CLI::IsMember(DTypeSpellings()))
      ->capture_default_str();
  submit->add_option("--mode", s->mode, "Mode the kernel implements")
      ->check(CLI::IsMember(ModeSpellings()))
      ->capture_default_str();
  submit->add_option("--arch", s->target_arch, "sm_90a or sm_100a (default: the device's)");
  submit->add_option("--device", s->device, "Device whose limits apply (and that --suite uses)");
  submit->add_flag("--fast-math", s->fast_math, "--use_fast_math");
  submit->add_option("--define", s->defines, "-D NAME[=VALUE] (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--arg", s->args,
                     "A parameter of the kernel's own list, in order: [K:]NAME=VALUE, VALUE one "
                     "of hidden_states, residual, weight, output, residual_out, *_stride, batch, "
                     "hidden, eps, inv_hidden, sm_count, plan_scratch, null, abi_params, int:N, "
                     "float:X, scratch:BYTES, struct(VALUE:i32,...) (repeatable; none: the "
                     "struct ABI)");
  submit->add_option("--description", s->description, "Free text");
  submit->add_flag("--log", f->show_log, "Print the NVRTC log on success too");
  auto* suite = submit->add_option("--suite", f->suite,
                                   "Then benchmark this suite with the submission ranked");
  submit
      ->add_flag("--profile", f->profile, "With --suite: profile each kernel too (bench --profile)")
      ->needs(suite);

  CLI::App* subs = app->add_subcommand("submissions", "List, show or delete your submissions");
  subs->add_option("action", f->action, "list | get | delete")
      ->check(CLI::IsMember({"list", "get", "delete"}))
      ->capture_default_str();
  subs->add_option("submission", f->submission, "Id (sub-...) or name, for get and delete");
}

bool IsSubmitCommand(const std::string& command) {
  return command == "submit" || command == "submissions";
}

int RunSubmitCommand(const CliConfig& config, std::ostream& out, std::ostream& err) {
  const ClientOptions options = ToClientOptions(config.global);
  std::shared_ptr<grpc::Channel> channel;
  if (grpc::Status s = MakeChannel(options, &channel); !s.ok()) {
    err << "error: " << s.error_message() << "\n";
    return kExitUsage;
  }
  const SubmissionsClient client(channel, options);
  const SubmitFlags& f = config.submit;
  if (config.command == "submit") {
    absl::StatusOr<v1::SubmissionSpec> spec = BuildSubmissionSpec(f.spec);
    if (!spec.ok()) {
      err << "error: " << spec.status().message() << "\n";
      return kExitUsage;
    }
    v1::RegisterSubmissionResponse response;
    if (grpc::Status s = client.Register(*spec, &response, /*compile_error_in_response=*/true);
        !s.ok()) {
      return RpcError(err, s);
    }
    if (response.has_compile_error()) return CompileFailed(config.global, response, out, err);
    if (config.global.json) {
      if (int rc = PrintJson(config.global, out, err, response); rc != kExitOk) return rc;
    } else {
      out << (response.created() ? "registered " : "already registered ")
          << FormatSubmission(response.submission(), f.show_log) << "\n";
    }
    if (f.suite.empty()) return kExitOk;
    return Benchmark(config, options, response.submission().id(), out, err);
  }
  if (f.action == "list") {
    v1::ListSubmissionsResponse response;
    if (grpc::Status s = client.List(&response); !s.ok()) return RpcError(err, s);
    if (config.global.json) return PrintJson(config.global, out, err, response);
    out << FormatSubmissionList(response);
    return kExitOk;
  }
  if (f.submission.empty()) {
    err << "error: submissions " << f.action << ": give the submission's id or name\n";
    return kExitUsage;
  }
  if (f.action == "get") {
    v1::GetSubmissionResponse response;
    if (grpc::Status s = client.Get(f.submission, &response); !s.ok()) return RpcError(err, s);
    if (config.global.json) return PrintJson(config.global, out, err, response);
    out << FormatSubmission(response.submission(), true);
    return kExitOk;
  }
  v1::DeleteSubmissionResponse response;
  if (grpc::Status s = client.Delete(f.submission, &response); !s.ok()) return RpcError(err, s);
  if (config.global.json) return PrintJson(config.global, out, err, response);
  out << "deleted " << response.id() << "\n";
  return kExitOk;
}

}  // namespace kerneleval::client::cli
