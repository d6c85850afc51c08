#include "server/submissions/submissions_service.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"
#include "common/submission_id.h"
#include "server/grpc/raw_unary.h"
#include "server/grpc/status.h"
#include "server/submissions/cubin_params.h"
#include "server/submissions/param_binding.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

constexpr std::size_t kMaxDescriptionBytes = 1024;
// ListSubmissions' pages: what a page may hold, in submissions and serialized bytes (far
// under gRPC's default 4 MiB receive limit of clients).
constexpr std::uint32_t kDefaultListPage = 100, kMaxListPage = 1000;
constexpr std::size_t kMaxListPageBytes = std::size_t{1} << 20;

// The status as the caller gets it, its message at most kMaxStatusMessageBytes. Every echoed
// value is bounded where it is written (Quote); this holds the whole message to the limit
// whatever it gathered.
grpc::Status ToGrpc(const absl::Status& s) { return ToGrpcStatus(s, kMaxStatusMessageBytes); }

// A compile error's message with as many whole lines of the log as fit under
// kMaxStatusMessageBytes, and where the rest is.
std::string WithLogHead(absl::string_view message, absl::string_view log) {
  if (log.empty()) return std::string(message);
  if (message.size() + 1 + log.size() <= kMaxStatusMessageBytes) {
    return absl::StrCat(message, "\n", log);
  }
  const std::string note_tail =
      absl::StrCat(" of ", log.size(),
                   " bytes; RegisterSubmissionRequest.compile_error_in_response answers with "
                   "all of it)");
  // The head's length, in the note, takes at most as many digits as the log's.
  const std::size_t reserved = message.size() + 1 + note_tail.size() + 40;
  const std::size_t room = kMaxStatusMessageBytes - std::min(kMaxStatusMessageBytes, reserved);
  absl::string_view head = log.substr(0, room);
  if (const std::size_t line_end = head.rfind('\n'); line_end != absl::string_view::npos) {
    head = head.substr(0, line_end);
  }
  return absl::StrCat(message, "\n", head, "\n... (the log's first ", head.size(), note_tail);
}

// Register's answer for the RPC: a compile error in the response body when the request asks
// for it, else as the status with the head of the log.
absl::Status RegisterAnswer(absl::StatusOr<v1::RegisterSubmissionResponse> registered,
                            const v1::RegisterSubmissionRequest& request,
                            v1::RegisterSubmissionResponse* response) {
  if (registered.ok()) {
    *response = std::move(*registered);
    return absl::OkStatus();
  }
  const absl::Status& failed = registered.status();
  const auto payload = failed.GetPayload(kCompileDiagnosticsPayload);
  if (!payload.has_value()) return failed;
  v1::CompileDiagnostics diagnostics;
  if (!diagnostics.ParseFromString(std::string(*payload))) {
    return absl::InternalError("submission: the compiler's diagnostics do not parse");
  }
  if (request.compile_error_in_response()) {
    v1::CompileError* error = response->mutable_compile_error();
    error->set_code(static_cast<int>(failed.code()));
    error->set_message(std::string(failed.message()));
    *error->mutable_diagnostics() = std::move(diagnostics);
    return absl::OkStatus();
  }
  return absl::Status(failed.code(), WithLogHead(failed.message(), diagnostics.log()));
}

// The content a submission's id is the hash of: everything that changes what runs.
std::string ContentKey(const internal::CompileRequest& compile, const v1::SubmissionSpec& spec) {
  v1::SubmissionSpec content;
  *content.mutable_launch_plan() = spec.launch_plan();
  content.set_dtype(spec.dtype());
  content.set_mode(spec.mode());
  std::string plan;
  google::protobuf::io::StringOutputStream stream(&plan);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    content.SerializeToCodedStream(&coded);
  }
  return absl::StrCat(Compiler::CacheKey(compile), ":", Sha256Hex(plan));
}

// The spec's own fields checked and its defaults filled in (CUDA, MODE_OUTPUT); what depends on
// the target device is checked once that is known (CheckForTarget).
absl::Status NormalizeSpec(v1::SubmissionSpec& spec, std::size_t max_source_bytes) {
  if (absl::Status s = CheckSubmissionName(spec.name(), "submission.name"); !s.ok()) return s;
  if (spec.description().size() > kMaxDescriptionBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission.description: ", spec.description().size(), " bytes; at most ",
                     kMaxDescriptionBytes));
  }
  if (spec.language() == v1::SOURCE_LANGUAGE_UNSPECIFIED) {
    spec.set_language(v1::SOURCE_LANGUAGE_CUDA);
  }
  if (spec.language() != v1::SOURCE_LANGUAGE_CUDA && spec.language() != v1::SOURCE_LANGUAGE_PTX) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission.language: unknown value ", static_cast<int>(spec.language())));
  }
  if (spec.source().empty()) {
    return absl::InvalidArgumentError("submission.source: empty; give the kernel's source");
  }
  if (spec.source().size() > max_source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("submission.source: ", spec.source().size(),
                                                   " bytes; at most ", max_source_bytes));
  }
  if (spec.dtype() == v1::DTYPE_UNSPECIFIED || !v1::DType_IsValid(spec.dtype())) {
    return absl::InvalidArgumentError(
        "submission.dtype: required: DTYPE_BF16, DTYPE_FP16 or DTYPE_FP32");
  }
  if (spec.mode() == v1::MODE_UNSPECIFIED) spec.set_mode(v1::MODE_OUTPUT);
  if (!v1::Mode_IsValid(spec.mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission.mode: unknown value ", static_cast<int>(spec.mode())));
  }
  return absl::OkStatus();
}

// Each kernel's binding against the parameter sizes the compile read from its PTX.
absl::Status CheckBindingAgainstPtx(const v1::LaunchPlan& plan,
                                    const v1::CompileDiagnostics& diagnostics) {
  for (int i = 0; i < plan.kernels_size() && i < diagnostics.kernels_size(); ++i) {
    const auto& bytes = diagnostics.kernels(i).param_bytes();
    if (absl::Status s = CheckParamSizes(plan.kernels(i), {bytes.begin(), bytes.end()},
                                         absl::StrCat("submission.launch_plan.kernels[", i, "]"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Each kernel's parameters as the assembled module records them (cubin_params.h) against
// those the PTX declared, which the binding was checked against: what each launch fills must
// match the module that runs.
absl::Status CheckPtxAgainstCubin(const v1::CompileDiagnostics& diagnostics,
                                  absl::string_view cubin) {
  for (int i = 0; i < diagnostics.kernels_size(); ++i) {
    const v1::KernelResources& kernel = diagnostics.kernels(i);
    const auto& declared = kernel.param_bytes();
    absl::StatusOr<std::vector<CubinParam>> recorded =
        CubinKernelParams(cubin, kernel.lowered_name());
    if (!recorded.ok()) {
      if (declared.empty()) continue;  // a kernel without parameters may have no records
      return recorded.status();
    }
    bool same = static_cast<int>(recorded->size()) == declared.size();
    for (int j = 0; same && j < declared.size(); ++j) {
      same = static_cast<std::int64_t>((*recorded)[j].bytes) == declared[j];
    }
    if (!same) {
      std::vector<std::string> sizes;
      for (const CubinParam& p : *recorded) sizes.push_back(absl::StrCat(p.bytes));
      return absl::InvalidArgumentError(absl::StrCat(
          "submission.launch_plan.kernels[", i, "].entry: ", Quote(kernel.entry()),
          " was assembled with ", recorded->size(), " parameters of [", absl::StrJoin(sizes, ", "),
          "] bytes, its PTX declares [", absl::StrJoin(declared, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

// The launch plan against the target's limits, then the defines and includes the language
// allows.
absl::Status CheckForTarget(const v1::SubmissionSpec& spec, const DeviceLimits& limits) {
  if (absl::Status s = ValidateLaunchPlan(spec.launch_plan(), limits, "submission.launch_plan");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateParamBinding(spec.launch_plan(), "submission.launch_plan");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckDefines(spec.options().defines(), "submission.options.defines");
      !s.ok()) {
    return s;
  }
  if (spec.language() == v1::SOURCE_LANGUAGE_CUDA) {
    return CheckIncludes(spec.source(), "submission.source");
  }
  if (spec.options().defines_size() > 0 || spec.options().fast_math()) {
    return absl::InvalidArgumentError(
        "submission.options: defines and fast_math apply to CUDA sources, not PTX");
  }
  return absl::OkStatus();
}

// What the compiler is asked: the source and its options for `arch`, the plan's entries.
internal::CompileRequest CompileRequestFor(const v1::SubmissionSpec& spec,
                                           const std::string& arch) {
  internal::CompileRequest compile;
  compile.set_language(spec.language());
  compile.set_source(spec.source());
  compile.set_arch(arch);
  compile.set_fast_math(spec.options().fast_math());
  *compile.mutable_defines() = spec.options().defines();
  for (const v1::KernelLaunch& k : spec.launch_plan().kernels()) compile.add_entries(k.entry());
  return compile;
}

// The record to store, its id the hash of its content; the cubin is moved out of `compiled`.
internal::StoredSubmission StoredRecord(const std::string& owner, const v1::SubmissionSpec& spec,
                                        const internal::CompileRequest& compile,
                                        internal::CompileResponse& compiled) {
  internal::StoredSubmission stored;
  v1::Submission* sub = stored.mutable_submission();
  sub->set_id(
      absl::StrCat(kSubmissionIdPrefix, Sha256Hex(ContentKey(compile, spec)).substr(0, 24)));
  sub->set_owner(owner);
  *sub->mutable_spec() = spec;
  sub->mutable_spec()->clear_device();  // the limits checked are recorded by the arch
  *sub->mutable_diagnostics() = compiled.diagnostics();
  sub->set_created_unix_seconds(static_cast<std::int64_t>(std::time(nullptr)));
  *stored.mutable_cubin() = std::move(*compiled.mutable_cubin());
  return stored;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SubmissionsService>> SubmissionsService::Create(
    SubmissionsOptions options, DeviceLister devices) {
  std::unique_ptr<Registry> registry;
  if (options.enabled) {
    RegistryOptions r;
    r.data_dir = options.data_dir;
    r.max_per_owner = options.max_per_owner;
    r.max_total = options.max_total;
    r.shared = options.shared;
    absl::StatusOr<std::unique_ptr<Registry>> opened = Registry::Open(r);
    if (!opened.ok()) return opened.status();
    registry = std::move(*opened);
  }
  return std::unique_ptr<SubmissionsService>(
      new SubmissionsService(std::move(options), std::move(devices), std::move(registry)));
}

SubmissionsService::SubmissionsService(SubmissionsOptions options, DeviceLister devices,
                                       std::unique_ptr<Registry> registry)
    : options_(std::move(options)),
      devices_(std::move(devices)),
      registry_(std::move(registry)),
      compiler_(options_.compiler) {
  if (!options_.enabled) return;
  for (int i = 0; i < std::max(1, options_.compile_workers); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

SubmissionsService::~SubmissionsService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

absl::Status SubmissionsService::Enqueue(const std::string& owner, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("submission: the server is shutting down");
    if (queue_.waiting() >= options_.compile_queue) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "submission: ", options_.compile_queue, " compiles are waiting already; retry later"));
    }
    const std::size_t mine = queue_.active(owner);
    if (options_.max_compiles_per_owner > 0 && mine >= options_.max_compiles_per_owner) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "submission: owner ", Quote(owner), " has ", mine,
          " compiles waiting or running, the most one owner may (--max-compiles-per-owner); "
          "retry when one has finished"));
    }
    queue_.Push(owner, std::move(job));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void SubmissionsService::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every accepted compile has answered
    auto [owner, job] = queue_.Pop();
    lock.unlock();
    job();
    lock.lock();
    queue_.Finished(owner);
  }
}

absl::Status SubmissionsService::Enabled() const {
  if (options_.enabled) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "submissions are off on this server; start kerneleval-server with --submissions");
}

// The owner a call's submissions belong to (caller_identity.h).
std::string SubmissionsService::OwnerOf(const grpc::CallbackServerContext& context) const {
  return OwnerOfCall(options_.identities, context);
}

absl::StatusOr<DeviceLimits> SubmissionsService::TargetFor(const v1::SubmissionSpec& spec) const {
  const std::vector<v1::Device> devices = devices_ ? devices_() : std::vector<v1::Device>{};
  const std::string& arch = spec.target_arch();
  if (!arch.empty() && !IsSupportedArch(arch)) {
    return absl::InvalidArgumentError(absl::StrCat("submission.target_arch: ", Quote(arch),
                                                   " is not supported; use sm_90a or sm_100a"));
  }
  if (!spec.device().empty()) {
    for (const v1::Device& d : devices) {
      if (d.name() != spec.device()) continue;
      absl::StatusOr<DeviceLimits> limits = LimitsForDevice(d);
      if (limits.ok() && !arch.empty() && arch != limits->arch) {
        return absl::InvalidArgumentError(absl::StrCat("submission.target_arch: ", arch,
                                                       " does not run on ", d.name(), " (",
                                                       limits->arch, ")"));
      }
      return limits;
    }
    return absl::NotFoundError(absl::StrCat("submission.device: ", Quote(spec.device()),
                                            " is not a device of this server"));
  }
  for (const v1::Device& d : devices) {
    absl::StatusOr<DeviceLimits> limits = LimitsForDevice(d);
    if (limits.ok() && (arch.empty() || arch == limits->arch)) return limits;
  }
  return LimitsForArch(arch.empty() ? "sm_90a" : arch, "submission.target_arch");
}

absl::StatusOr<v1::RegisterSubmissionResponse> SubmissionsService::Register(
    const std::string& owner, const v1::SubmissionSpec& given) {
  if (absl::Status s = Enabled(); !s.ok()) return s;
  v1::SubmissionSpec spec = given;
  if (absl::Status s = NormalizeSpec(spec, options_.max_source_bytes); !s.ok()) return s;
  absl::StatusOr<DeviceLimits> limits = TargetFor(spec);
  if (!limits.ok()) return limits.status();
  spec.set_target_arch(limits->arch);
  if (absl::Status s = CheckForTarget(spec, *limits); !s.ok()) return s;

  const internal::CompileRequest compile = CompileRequestFor(spec, limits->arch);
  absl::StatusOr<internal::CompileResponse> compiled = compiler_.Compile(owner, compile);
  if (!compiled.ok()) return compiled.status();
  if (absl::Status s = ValidateResources(spec.launch_plan(), compiled->diagnostics().kernels(),
                                         *limits, "submission.launch_plan");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckBindingAgainstPtx(spec.launch_plan(), compiled->diagnostics());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPtxAgainstCubin(compiled->diagnostics(), compiled->cubin()); !s.ok()) {
    return s;
  }

  internal::StoredSubmission stored = StoredRecord(owner, spec, compile, *compiled);
  v1::Submission* sub = stored.mutable_submission();
  absl::StatusOr<bool> added = registry_->Add(stored);
  if (!added.ok()) return added.status();
  v1::RegisterSubmissionResponse response;
  if (*added) {
    *response.mutable_submission() = std::move(*sub);
  } else {
    // Registered before: the stored record (its creation time), today's diagnostics.
    absl::StatusOr<internal::StoredSubmission> existing = registry_->Find(owner, sub->id());
    if (!existing.ok()) return existing.status();
    *response.mutable_submission() = existing->submission();
    *response.mutable_submission()->mutable_diagnostics() = compiled->diagnostics();
  }
  response.set_created(*added);
  return response;
}

absl::StatusOr<ResolvedSubmission> SubmissionsService::Resolve(
    const std::string& owner, const std::string& id_or_name) const {
  if (absl::Status s = Enabled(); !s.ok()) return s;
  absl::StatusOr<internal::StoredSubmission> found = registry_->Find(owner, id_or_name);
  if (!found.ok()) return found.status();
  ResolvedSubmission r;
  r.submission = std::move(*found->mutable_submission());
  r.cubin = std::move(*found->mutable_cubin());
  return r;
}

grpc::ServerUnaryReactor* SubmissionsService::RegisterSubmission(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto request = std::make_shared<v1::RegisterSubmissionRequest>();
  if (grpc::Status s = ParseRawRequest(*request_bytes, "RegisterSubmission", request.get());
      !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  if (absl::Status s = Enabled(); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  const std::string owner = OwnerOf(*context);
  // Quotas first: an owner at its limit costs no compile.
  if (const std::size_t held = registry_->CountOf(owner); held >= options_.max_per_owner) {
    reactor->Finish(ToGrpc(absl::ResourceExhaustedError(
        absl::StrCat("submission: ", Quote(owner), " holds ", held,
                     " submissions, the most allowed; delete one first"))));
    return reactor;
  }
  const absl::Status queued = Enqueue(owner, [this, reactor, request, response_bytes, owner] {
    v1::RegisterSubmissionResponse response;
    grpc::Status s =
        ToGrpc(RegisterAnswer(Register(owner, request->submission()), *request, &response));
    if (s.ok()) {
      bool own = false;
      s = grpc::SerializationTraits<v1::RegisterSubmissionResponse>::Serialize(
          response, response_bytes, &own);
    }
    reactor->Finish(s);
  });
  if (!queued.ok()) reactor->Finish(ToGrpc(queued));
  return reactor;
}

grpc::ServerUnaryReactor* SubmissionsService::ListSubmissions(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return RawUnary<v1::ListSubmissionsRequest, v1::ListSubmissionsResponse>(
      context, request, response, "ListSubmissions",
      [this](grpc::CallbackServerContext* c, const v1::ListSubmissionsRequest& r,
             v1::ListSubmissionsResponse* out) {
        if (absl::Status s = Enabled(); !s.ok()) return ToGrpc(s);
        if (r.page_size() > kMaxListPage) {
          return ToGrpc(absl::InvalidArgumentError(
              absl::StrCat("page_size: ", r.page_size(), "; at most ", kMaxListPage)));
        }
        // The token is the last name of the page before: names are unique per owner and
        // ordered, so a submission deleted or added between pages moves no other one.
        absl::StatusOr<SubmissionPage> page = registry_->List(
            OwnerOf(*c), r.page_token(), r.page_size() == 0 ? kDefaultListPage : r.page_size(),
            kMaxListPageBytes);
        if (!page.ok()) return ToGrpc(page.status());
        for (v1::Submission& s : page->submissions) *out->add_submissions() = std::move(s);
        if (page->more) out->set_next_page_token(out->submissions().rbegin()->spec().name());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SubmissionsService::GetSubmission(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return RawUnary<v1::GetSubmissionRequest, v1::GetSubmissionResponse>(
      context, request, response, "GetSubmission",
      [this](grpc::CallbackServerContext* c, const v1::GetSubmissionRequest& r,
             v1::GetSubmissionResponse* out) {
        absl::StatusOr<ResolvedSubmission> found = Resolve(OwnerOf(*c), r.submission());
        if (found.ok()) *out->mutable_submission() = std::move(found->submission);
        return ToGrpc(found.status());
      });
}

grpc::ServerUnaryReactor* SubmissionsService::DeleteSubmission(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* request,
                                                               grpc::ByteBuffer* response) {
  return RawUnary<v1::DeleteSubmissionRequest, v1::DeleteSubmissionResponse>(
      context, request, response, "DeleteSubmission",
      [this](grpc::CallbackServerContext* c, const v1::DeleteSubmissionRequest& r,
             v1::DeleteSubmissionResponse* out) {
        if (absl::Status s = Enabled(); !s.ok()) return ToGrpc(s);
        const std::string owner = OwnerOf(*c);
        absl::StatusOr<std::string> id = registry_->Delete(owner, r.submission());
        if (id.ok()) {
          out->set_id(*id);
          if (options_.on_deleted) options_.on_deleted(owner, *id);
        }
        return ToGrpc(id.status());
      });
}

}  // namespace kerneleval::server::submissions
