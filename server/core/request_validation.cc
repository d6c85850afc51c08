#include "server/core/request_validation.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"
#include "common/did_you_mean.h"
#include "common/enum_names.h"
#include "common/protocol.h"
#include "common/status_macros.h"
#include "common/suites.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/figures/correctness.h"

namespace kerneleval::server {
namespace {

std::string ShapeString(const v1::Tensor& t) { return ShapeText(t.shape()); }

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Checks one tensor alone: dtype set, rank, positive dimensions, element count without
// overflow, byte length. Returns the element count.
absl::StatusOr<std::uint64_t> CheckTensor(const v1::Tensor& t, const std::string& field, int rank,
                                          const RequestLimits& limits) {
  ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(t.dtype(), (field + ".dtype").c_str()));
  if (t.shape_size() != rank) {
    return Invalid(field + ".shape",
                   absl::StrCat("expected rank ", rank, ", got ", ShapeString(t)));
  }
  std::uint64_t elements = 1;
  for (int i = 0; i < t.shape_size(); ++i) {
    const std::int64_t d = t.shape(i);
    if (d <= 0) {
      return Invalid(absl::StrCat(field, ".shape[", i, "]"),
                     absl::StrCat("dimension must be positive, got ", d));
    }
    if (elements > std::numeric_limits<std::uint64_t>::max() / 8 / static_cast<std::uint64_t>(d)) {
      return Invalid(field + ".shape", absl::StrCat(ShapeString(t), " overflows"));
    }
    elements *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t expected = elements * ElementSize(dtype);
  if (expected > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(field, ": ", ShapeString(t), " is ", expected,
                                                     " bytes, over the server limit of ",
                                                     limits.max_tensor_bytes));
  }
  if (t.data().size() != expected) {
    return Invalid(field + ".data",
                   absl::StrCat("has ", t.data().size(), " bytes, but shape ", ShapeString(t),
                                " of ", DTypeShortName(t.dtype()), " needs ", expected));
  }
  return elements;
}

// The suite a Benchmark request names, from those this server serves.
absl::StatusOr<v1::SuiteDefinition> FindServedSuite(
    const std::string& name, const std::vector<v1::SuiteDefinition>& suites) {
  const v1::SuiteDefinition* found = nullptr;
  std::vector<std::string> names;
  for (const v1::SuiteDefinition& s : suites) {
    names.push_back(s.name());
    if (s.name() == name) found = &s;
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("suite: ", Quote(name), " not found",
                                            DidYouMean(name, names),
                                            " (available: ", absl::StrJoin(names, ", "), ")"));
  }
  return *found;
}

// A custom suite, checked by the suite rules. The names of the served suites are reserved:
// results stored under one join its leaderboard, so a custom suite may carry one only with the
// very same content, and is then that named suite.
absl::Status AcceptCustomSuite(const v1::SuiteDefinition& custom,
                               const std::vector<v1::SuiteDefinition>& suites,
                               BenchmarkPlan* plan) {
  RETURN_IF_ERROR(ValidateSuite(custom, "custom_suite"));
  plan->suite = custom;
  if (plan->suite.name().empty()) plan->suite.set_name("custom");
  for (const v1::SuiteDefinition& s : suites) {
    if (s.name() != plan->suite.name()) continue;
    if (!google::protobuf::util::MessageDifferencer::Equals(s, plan->suite)) {
      return Invalid("custom_suite.name",
                     absl::StrCat(Quote(s.name()),
                                  " is the name of a suite this server serves, with other "
                                  "content; name the custom suite differently, or ask for "
                                  "suite ",
                                  Quote(s.name())));
    }
    plan->named_suite = true;
  }
  return absl::OkStatus();
}

// Bounds of a suite sent as text.
constexpr std::size_t kMaxSuiteJsonBytes = 1 << 20;
constexpr std::size_t kMaxSuiteErrorChars = 1024;

// A suite file's text, parsed as `--suite-file` is (common/suite_json.cc), then accepted as
// a custom suite. The parser's messages name the place in the file after "suite_json: ".
absl::Status AcceptSuiteJson(const std::string& text,
                             const std::vector<v1::SuiteDefinition>& suites, BenchmarkPlan* plan) {
  if (text.size() > kMaxSuiteJsonBytes) {
    return Invalid("suite_json",
                   absl::StrCat(text.size(), " bytes; at most ", kMaxSuiteJsonBytes, " (1 MiB)"));
  }
  absl::StatusOr<v1::SuiteDefinition> parsed = ParseSuiteJson(text, "suite_json");
  if (!parsed.ok()) {
    // The JSON reader's own messages quote what it last read, which may be a long token of
    // the caller's text: the message is cut to stay far below gRPC's metadata limit.
    std::string message(parsed.status().message());
    if (message.size() > kMaxSuiteErrorChars)
      message = message.substr(0, kMaxSuiteErrorChars) + "...";
    return absl::InvalidArgumentError(message);
  }
  return AcceptCustomSuite(*parsed, suites, plan);
}

// Exactly one of `suite` (a served suite's name), `custom_suite` and `suite_json`, into
// plan->suite.
absl::Status ResolveSuite(const v1::BenchmarkRequest& request,
                          const std::vector<v1::SuiteDefinition>& suites, BenchmarkPlan* plan) {
  const int given =
      !request.suite().empty() + request.has_custom_suite() + !request.suite_json().empty();
  if (given > 1) return Invalid("suite, custom_suite, suite_json", "give one, not several");
  if (given == 0) {
    return Invalid("suite", "required (a suite name, custom_suite or suite_json)");
  }
  if (!request.suite_json().empty()) return AcceptSuiteJson(request.suite_json(), suites, plan);
  if (request.suite().empty()) return AcceptCustomSuite(request.custom_suite(), suites, plan);
  ASSIGN_OR_RETURN(plan->suite, FindServedSuite(request.suite(), suites));
  plan->named_suite = true;
  return absl::OkStatus();
}

// Implementations are chosen per device later; here only their names must be non-empty.
absl::Status CheckImplementationNames(const v1::BenchmarkRequest& request) {
  for (int i = 0; i < request.implementations_size(); ++i) {
    if (request.implementations(i).empty()) {
      return Invalid(absl::StrCat("implementations[", i, "]"), "must not be empty");
    }
  }
  return absl::OkStatus();
}

// Workload `i` of the plan's suite resolved to its problem, seed and tolerance, within the
// server's limits. `field` names it in errors.
absl::StatusOr<PlannedWorkload> PlanWorkload(const BenchmarkPlan& plan, int i, DType dtype,
                                             Mode mode, const std::string& field,
                                             const RequestLimits& limits) {
  const v1::SuiteDefinition& suite = plan.suite;
  const v1::Workload& w = suite.workloads(i);
  ASSIGN_OR_RETURN(const WorkloadShape shape, ResolveShape(suite, w));
  PlannedWorkload planned;
  planned.index = i;
  planned.name = WorkloadName(suite, w);
  planned.workload = w;
  planned.problem.dtype = dtype;
  planned.problem.mode = mode;
  planned.problem.batch = shape.batch;
  planned.problem.hidden = shape.hidden;
  planned.problem.eps = static_cast<float>(suite.eps() > 0 ? suite.eps() : kDefaultEps);
  planned.seed = w.seed() != 0 ? w.seed() : plan.protocol.seed();
  planned.tolerance = ResolveTolerance(dtype, w.tolerance());
  if (planned.problem.TensorBytes() > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": ", shape.batch, " x ", shape.hidden, " needs ", planned.problem.TensorBytes(),
        " bytes per tensor, over the server limit of ", limits.max_tensor_bytes));
  }
  if (shape.batch > limits.max_batch) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": batch ", shape.batch, " is over the server limit of ", limits.max_batch));
  }
  if (shape.hidden > limits.max_hidden) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": hidden ", shape.hidden, " is over the server limit of ", limits.max_hidden));
  }
  return planned;
}

// Every workload of plan->suite, in order, with the resolved protocol's seed as the default.
// Fields of a custom suite are named under "custom_suite.".
absl::Status PlanWorkloads(const RequestLimits& limits, BenchmarkPlan* plan) {
  const v1::SuiteDefinition& suite = plan->suite;
  const std::string prefix = plan->named_suite ? "" : "custom_suite.";
  ASSIGN_OR_RETURN(const DType dtype, DTypeFromProto(suite.dtype(), prefix + "dtype"));
  ASSIGN_OR_RETURN(const Mode mode, ModeFromProto(suite.mode(), prefix + "mode"));
  for (int i = 0; i < suite.workloads_size(); ++i) {
    const std::string field = absl::StrCat(prefix, "workloads[", i, "]");
    ASSIGN_OR_RETURN(PlannedWorkload planned, PlanWorkload(*plan, i, dtype, mode, field, limits));
    plan->workloads.push_back(std::move(planned));
  }
  return absl::OkStatus();
}

}  // namespace

std::uint64_t DefaultMaxQueuedBytes() {
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") continue;
    std::uint64_t limit = 0;
    if (!absl::SimpleAtoi(text, &limit)) continue;
    // cgroup v1 reports "no limit" as a huge page-rounded number.
    if (limit == 0 || limit >= (std::uint64_t{1} << 60)) continue;
    return limit / 2;
  }
  return 0;
}

absl::StatusOr<Problem> ValidateRunRequest(const v1::RunRequest& request,
                                           const RequestLimits& limits) {
  if (!v1::Timer_IsValid(request.timer())) {
    return Invalid("timer", absl::StrCat("unknown value ", request.timer()));
  }
  if (!request.has_hidden_states()) return Invalid("hidden_states", "required");
  if (!request.has_residual()) return Invalid("residual", "required");
  if (!request.has_weight()) return Invalid("weight", "required");
  const v1::Tensor& x = request.hidden_states();
  const v1::Tensor& r = request.residual();
  const v1::Tensor& w = request.weight();

  RETURN_IF_ERROR(CheckTensor(x, "hidden_states", 2, limits).status());
  if (r.dtype() != x.dtype()) {
    return Invalid("residual.dtype",
                   absl::StrCat(DTypeShortName(r.dtype()), " does not match hidden_states.dtype ",
                                DTypeShortName(x.dtype())));
  }
  if (w.dtype() != x.dtype()) {
    return Invalid("weight.dtype",
                   absl::StrCat(DTypeShortName(w.dtype()), " does not match hidden_states.dtype ",
                                DTypeShortName(x.dtype())));
  }
  if (r.shape_size() != 2 || r.shape(0) != x.shape(0) || r.shape(1) != x.shape(1)) {
    return Invalid(
        "residual.shape",
        absl::StrCat(ShapeString(r), " does not match hidden_states.shape ", ShapeString(x)));
  }
  RETURN_IF_ERROR(CheckTensor(r, "residual", 2, limits).status());
  if (w.shape_size() != 1 || w.shape(0) != x.shape(1)) {
    return Invalid("weight.shape",
                   absl::StrCat(ShapeString(w), " must be [hidden] = [", x.shape(1), "]"));
  }
  RETURN_IF_ERROR(CheckTensor(w, "weight", 1, limits).status());

  Problem p;
  ASSIGN_OR_RETURN(p.dtype, DTypeFromProto(x.dtype(), "hidden_states.dtype"));
  ASSIGN_OR_RETURN(p.mode, ModeFromProto(request.mode(), "mode"));
  p.batch = x.shape(0);
  p.hidden = x.shape(1);
  if (p.batch > limits.max_batch) {
    return absl::ResourceExhaustedError(absl::StrCat("hidden_states.shape[0]: batch ", p.batch,
                                                     " is over the server limit of ",
                                                     limits.max_batch));
  }
  if (p.hidden > limits.max_hidden) {
    return absl::ResourceExhaustedError(absl::StrCat("hidden_states.shape[1]: hidden ", p.hidden,
                                                     " is over the server limit of ",
                                                     limits.max_hidden));
  }
  double eps = kDefaultEps;
  if (request.has_eps()) {
    eps = request.eps();
    if (!std::isfinite(eps) || eps <= 0) {
      return Invalid("eps", absl::StrCat("must be finite and > 0, got ", eps));
    }
    // The kernels compute in fp32: the value must neither overflow nor round to 0 there.
    const float eps32 = static_cast<float>(eps);
    if (!std::isfinite(eps32) || eps > 1e30 || !(eps32 > 0)) {
      return Invalid("eps", absl::StrCat("must be representable in fp32 and > 0 there, got ", eps));
    }
  }
  p.eps = static_cast<float>(eps);
  if (request.repetitions() > limits.max_repetitions) {
    return Invalid("repetitions", absl::StrCat(request.repetitions(), " is over the maximum ",
                                               limits.max_repetitions));
  }
  if (request.warmup() > limits.max_warmup) {
    return Invalid("warmup",
                   absl::StrCat(request.warmup(), " is over the maximum ", limits.max_warmup));
  }
  return p;
}

absl::StatusOr<v1::Protocol> ResolveProtocol(const v1::Protocol& requested,
                                             const RequestLimits& limits) {
  v1::Protocol p = WithProtocolDefaults(requested);
  if (p.warmup() > limits.max_warmup) {
    return Invalid("protocol.warmup",
                   absl::StrCat(p.warmup(), " is over the maximum ", limits.max_warmup));
  }
  if (p.repetitions() > limits.max_repetitions) {
    return Invalid("protocol.repetitions",
                   absl::StrCat(p.repetitions(), " is over the maximum ", limits.max_repetitions));
  }
  if (p.repetitions() == 0 && !p.has_adaptive()) {
    return Invalid("protocol.repetitions", "must be at least 1 (or set protocol.adaptive)");
  }
  if (p.has_adaptive()) {
    const v1::AdaptiveStop* a = &p.adaptive();
    if (a->max_samples() > limits.max_repetitions) {
      return Invalid(
          "protocol.adaptive.max_samples",
          absl::StrCat(a->max_samples(), " is over the maximum ", limits.max_repetitions));
    }
    if (a->min_samples() > a->max_samples()) {
      return Invalid("protocol.adaptive.min_samples",
                     absl::StrCat(a->min_samples(), " is over max_samples ", a->max_samples()));
    }
    if (!std::isfinite(a->target_relative_spread()) || a->target_relative_spread() < 0) {
      return Invalid("protocol.adaptive.target_relative_spread",
                     absl::StrCat("must be finite and >= 0, got ", a->target_relative_spread()));
    }
    if (!std::isfinite(a->max_seconds()) || a->max_seconds() < 0) {
      return Invalid("protocol.adaptive.max_seconds",
                     absl::StrCat("must be finite and >= 0, got ", a->max_seconds()));
    }
  }
  if (!v1::CacheMode_IsValid(p.cache())) {
    return Invalid("protocol.cache", absl::StrCat("unknown value ", p.cache()));
  }
  if (!v1::Timer_IsValid(p.timer())) {
    return Invalid("protocol.timer", absl::StrCat("unknown value ", p.timer()));
  }
  if (p.graph_calls() > limits.max_graph_calls) {
    return Invalid("protocol.graph_calls",
                   absl::StrCat(p.graph_calls(), " is over the maximum ", limits.max_graph_calls));
  }
  if (!std::isfinite(p.max_total_seconds()) || p.max_total_seconds() < 0) {
    return Invalid("protocol.max_total_seconds",
                   absl::StrCat("must be finite and >= 0, got ", p.max_total_seconds()));
  }
  if (p.max_total_seconds() == 0 || p.max_total_seconds() > limits.max_benchmark_seconds) {
    p.set_max_total_seconds(limits.max_benchmark_seconds);
  }
  return p;
}

absl::StatusOr<BenchmarkPlan> ValidateBenchmarkRequest(
    const v1::BenchmarkRequest& request, const std::vector<v1::SuiteDefinition>& suites,
    const RequestLimits& limits) {
  BenchmarkPlan plan;
  RETURN_IF_ERROR(ResolveSuite(request, suites, &plan));
  ASSIGN_OR_RETURN(plan.protocol, ResolveProtocol(request.protocol(), limits));
  RETURN_IF_ERROR(CheckImplementationNames(request));
  RETURN_IF_ERROR(PlanWorkloads(limits, &plan));
  return plan;
}

v1::Protocol RunProtocol(const v1::RunRequest& request, bool gpu) {
  v1::Protocol p;
  p.set_warmup(request.warmup());
  p.set_repetitions(request.repetitions() == 0 ? 1 : request.repetitions());
  p.set_cache(v1::CACHE_MODE_HOT);
  p.set_timer(request.timer() != v1::TIMER_UNSPECIFIED ? request.timer()
              : gpu                                    ? v1::TIMER_CUDA_EVENTS
                                                       : v1::TIMER_UNSPECIFIED);
  p.set_profile(request.profile());
  return p;
}

}  // namespace kerneleval::server
