#include "server/oip/infer_translation.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_text.h"
#include "common/conversions.h"

namespace kerneleval::server::oip {
namespace {

using inference::InferParameter;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

// Raw contents are little-endian; fp32_contents are packed by copying floats.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "raw contents are little-endian");

constexpr std::array<const char*, 3> kInputs = {"hidden_states", "residual", "weight"};
constexpr char kOutput[] = "output";
constexpr char kResidualOut[] = "residual_out";
constexpr char kRequestParameters[] =
    "eps, mode, device, check_correctness, warmup, repetitions, timer, timeout, priority";

// A client's map key as part of a field path: as given when short and printable, else
// quoted and cut (a 10 KB key must not make the error too long to deliver).
std::string KeyText(const std::string& key) {
  const bool plain =
      key.size() <= kMaxEchoedChars &&
      std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  return plain ? key : Quote(key);
}

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::StatusOr<double> NumberParam(const InferParameter& p, const std::string& field) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kDoubleParam:
      return p.double_param();
    case InferParameter::kInt64Param:
      return static_cast<double>(p.int64_param());
    case InferParameter::kUint64Param:
      return static_cast<double>(p.uint64_param());
    case InferParameter::kStringParam: {
      double v = 0;
      if (absl::SimpleAtod(p.string_param(), &v)) return v;
      return Invalid(field, absl::StrCat(Quote(p.string_param()), " is not a number"));
    }
    default:
      return Invalid(field, "expected a number (double_param, int64_param or string_param)");
  }
}

absl::StatusOr<std::int64_t> IntegerParam(const InferParameter& p, const std::string& field,
                                          std::int64_t max) {
  std::int64_t v = 0;
  switch (p.parameter_choice_case()) {
    case InferParameter::kInt64Param:
      v = p.int64_param();
      break;
    case InferParameter::kUint64Param:
      if (p.uint64_param() > static_cast<std::uint64_t>(max)) {
        return Invalid(field, absl::StrCat(p.uint64_param(), " is over ", max));
      }
      v = static_cast<std::int64_t>(p.uint64_param());
      break;
    case InferParameter::kStringParam:
      if (!absl::SimpleAtoi(p.string_param(), &v)) {
        return Invalid(field, absl::StrCat(Quote(p.string_param()), " is not an integer"));
      }
      break;
    default:
      return Invalid(field, "expected an integer (int64_param, uint64_param or string_param)");
  }
  if (v < 0 || v > max) return Invalid(field, absl::StrCat(v, " is not in [0, ", max, "]"));
  return v;
}

absl::StatusOr<bool> BoolParam(const InferParameter& p, const std::string& field) {
  if (p.parameter_choice_case() == InferParameter::kBoolParam) return p.bool_param();
  if (p.parameter_choice_case() == InferParameter::kStringParam) {
    if (p.string_param() == "true") return true;
    if (p.string_param() == "false") return false;
  }
  return Invalid(field, "expected a bool (bool_param, or string_param \"true\" / \"false\")");
}

absl::StatusOr<std::string> StringParam(const InferParameter& p, const std::string& field) {
  if (p.parameter_choice_case() == InferParameter::kStringParam) return p.string_param();
  return Invalid(field, "expected a string (string_param)");
}

absl::StatusOr<v1::Timer> ParseTimer(const std::string& name, const std::string& field) {
  if (const std::optional<v1::Timer> timer = ParseTimerName(name)) return *timer;
  return Invalid(field, absl::StrCat(Quote(name), " is not a timer (",
                                     absl::StrJoin(TimerNames(), ", "), ")"));
}

absl::Status ApplyParameter(const std::string& key, const InferParameter& p, InferPlan* plan) {
  const std::string field = absl::StrCat("parameters.", KeyText(key));
  v1::RunRequest& run = plan->run;
  if (key == "eps") {
    absl::StatusOr<double> eps = NumberParam(p, field);
    if (!eps.ok()) return eps.status();
    run.set_eps(*eps);  // range checked with the Run's own rule, under the field "eps"
  } else if (key == "mode") {
    absl::StatusOr<std::string> name = StringParam(p, field);
    if (!name.ok()) return name.status();
    const std::optional<v1::Mode> mode = ParseModeName(*name);
    if (!mode.has_value()) {
      return Invalid(field, absl::StrCat(Quote(*name), " is not a mode (",
                                         absl::StrJoin(ModeNames(), ", "), ")"));
    }
    run.set_mode(*mode);
  } else if (key == "device") {
    absl::StatusOr<std::string> device = StringParam(p, field);
    if (!device.ok()) return device.status();
    run.set_device(*device);
  } else if (key == "check_correctness") {
    absl::StatusOr<bool> check = BoolParam(p, field);
    if (!check.ok()) return check.status();
    run.set_check_correctness(*check);
  } else if (key == "warmup" || key == "repetitions") {
    absl::StatusOr<std::int64_t> n =
        IntegerParam(p, field, std::numeric_limits<std::uint32_t>::max());
    if (!n.ok()) return n.status();
    if (key == "warmup") {
      run.set_warmup(static_cast<std::uint32_t>(*n));
    } else {
      run.set_repetitions(static_cast<std::uint32_t>(*n));
    }
  } else if (key == "timer") {
    absl::StatusOr<std::string> name = StringParam(p, field);
    if (!name.ok()) return name.status();
    absl::StatusOr<v1::Timer> timer = ParseTimer(*name, field);
    if (!timer.ok()) return timer.status();
    run.set_timer(*timer);
  } else if (key == "timeout") {
    // At most a day: the deadline it makes must not overflow the clock.
    absl::StatusOr<std::int64_t> us = IntegerParam(p, field, std::int64_t{86400} * 1000000);
    if (!us.ok()) return us.status();
    plan->timeout = std::chrono::microseconds(*us);
  } else if (key == "priority") {
    // Each device runs its queue in arrival order; a priority changes nothing.
  } else {
    return Invalid(field, absl::StrCat("not a parameter of ", kOperation, " models (",
                                       kRequestParameters, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DType> ParseDatatype(const std::string& name, const std::string& field) {
  for (v1::DType d : {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32}) {
    if (name == DatatypeName(d)) return d;
  }
  return Invalid(field, absl::StrCat(Quote(name), " is not a datatype of ", kOperation,
                                     " models (BF16, FP16, FP32)"));
}

// Elements in the typed fields of every type.
int TypedCount(const inference::InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
         c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
         c.fp64_contents_size() + c.bytes_contents_size();
}

// The element count of a shape whose dimensions are plausible, else -1 (StartRun's
// validation then names what is wrong with the shape).
std::int64_t ElementCount(const google::protobuf::RepeatedField<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || d > (std::int64_t{1} << 31)) return -1;
    n *= d;
    if (n > (std::int64_t{1} << 40)) return -1;
  }
  return n;
}

// FP32 elements as typed contents, packed into the raw layout.
absl::Status PackFp32Contents(const ModelInferRequest::InferInputTensor& input,
                              const std::string& field, std::string* data) {
  const inference::InferTensorContents& c = input.contents();
  if (c.fp32_contents_size() == 0 || TypedCount(c) != c.fp32_contents_size()) {
    return Invalid(field + ".contents",
                   "FP32 elements go in fp32_contents (or raw_input_contents) and nowhere else");
  }
  const std::int64_t expected = ElementCount(input.shape());
  if (expected >= 0 && expected != c.fp32_contents_size()) {
    return Invalid(field + ".contents.fp32_contents",
                   absl::StrCat("has ", c.fp32_contents_size(), " elements, but shape ",
                                ShapeText(input.shape()), " has ", expected));
  }
  data->resize(static_cast<std::size_t>(c.fp32_contents_size()) * sizeof(float));
  std::memcpy(data->data(), c.fp32_contents().data(), data->size());
  return absl::OkStatus();
}

absl::Status TranslateInputs(const Model& model, ModelInferRequest* request, InferPlan* plan) {
  v1::RunRequest& run = plan->run;
  const std::array<v1::Tensor*, 3> tensors = {run.mutable_hidden_states(), run.mutable_residual(),
                                              run.mutable_weight()};
  std::array<bool, 3> seen = {false, false, false};
  const bool raw = request->raw_input_contents_size() > 0;
  if (raw && request->raw_input_contents_size() != request->inputs_size()) {
    return Invalid("raw_input_contents",
                   absl::StrCat("has ", request->raw_input_contents_size(), " entries for ",
                                request->inputs_size(), " inputs (one per input, in order)"));
  }
  for (int i = 0; i < request->inputs_size(); ++i) {
    ModelInferRequest::InferInputTensor* input = request->mutable_inputs(i);
    const std::string field = absl::StrCat("inputs[", i, "]");
    std::size_t slot = 0;
    while (slot < kInputs.size() && input->name() != kInputs[slot]) ++slot;
    if (slot == kInputs.size()) {
      return Invalid(field + ".name",
                     absl::StrCat(Quote(input->name()), " is not an input of ", model.name, " (",
                                  absl::StrJoin(kInputs, ", "), ")"));
    }
    if (seen[slot]) {
      return Invalid(field + ".name", absl::StrCat("input '", input->name(), "' appears twice"));
    }
    seen[slot] = true;
    if (!input->parameters().empty()) {
      return Invalid(
          absl::StrCat(field, ".parameters.", KeyText(input->parameters().begin()->first)),
          "inputs take no parameters (shared memory is not supported: send the "
          "tensor in raw_input_contents)");
    }
    v1::Tensor* tensor = tensors[slot];
    absl::StatusOr<v1::DType> dtype = ParseDatatype(input->datatype(), field + ".datatype");
    if (!dtype.ok()) return dtype.status();
    tensor->set_dtype(*dtype);
    *tensor->mutable_shape() = input->shape();
    if (raw) {
      if (TypedCount(input->contents()) > 0) {
        return Invalid(field + ".contents",
                       "set together with raw_input_contents: send one or the other");
      }
      tensor->mutable_data()->swap(*request->mutable_raw_input_contents(i));
    } else if (*dtype == v1::DTYPE_FP32) {
      if (absl::Status s = PackFp32Contents(*input, field, tensor->mutable_data()); !s.ok()) {
        return s;
      }
    } else {
      return Invalid(field, absl::StrCat(input->datatype(),
                                         " tensors travel only as raw_input_contents (the "
                                         "protocol has no typed field for them)"));
    }
  }
  for (std::size_t slot = 0; slot < kInputs.size(); ++slot) {
    if (!seen[slot]) {
      return Invalid("inputs", absl::StrCat("no input named '", kInputs[slot], "' (", model.name,
                                            " takes ", absl::StrJoin(kInputs, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ChooseOutputs(const Model& model, const ModelInferRequest& request, InferPlan* plan) {
  const bool writes_residual =
      plan->run.mode() == v1::MODE_OUTPUT_AND_RESIDUAL || plan->run.mode() == v1::MODE_IN_PLACE;
  if (request.outputs_size() == 0) {
    plan->outputs.push_back(kOutput);
    if (writes_residual) plan->outputs.push_back(kResidualOut);
    return absl::OkStatus();
  }
  for (int i = 0; i < request.outputs_size(); ++i) {
    const ModelInferRequest::InferRequestedOutputTensor& out = request.outputs(i);
    const std::string field = absl::StrCat("outputs[", i, "]");
    if (out.name() != kOutput && out.name() != kResidualOut) {
      return Invalid(field + ".name", absl::StrCat(Quote(out.name()), " is not an output of ",
                                                   model.name, " (output, residual_out)"));
    }
    if (out.name() == kResidualOut && !writes_residual) {
      return Invalid(field + ".name",
                     absl::StrCat("residual_out is written only in modes output_and_residual "
                                  "and in_place (parameters.mode is ",
                                  ModeShortName(plan->run.mode()), ")"));
    }
    for (const std::string& earlier : plan->outputs) {
      if (earlier == out.name()) {
        return Invalid(field + ".name", absl::StrCat("output '", out.name(), "' appears twice"));
      }
    }
    for (const auto& parameter : out.parameters()) {
      const std::string& key = parameter.first;
      // binary_data is the HTTP front's flag; over gRPC outputs are always raw bytes.
      if (key == "binary_data") continue;
      return Invalid(absl::StrCat(field, ".parameters.", KeyText(key)),
                     "not supported (outputs are returned whole, as raw_output_contents)");
    }
    plan->outputs.push_back(out.name());
  }
  return absl::OkStatus();
}

void SetDouble(ModelInferResponse* r, const char* key, double v) {
  (*r->mutable_parameters())[key].set_double_param(v);
}

void SetInt(ModelInferResponse* r, const char* key, std::int64_t v) {
  (*r->mutable_parameters())[key].set_int64_param(v);
}

void SetString(ModelInferResponse* r, const char* key, const std::string& v) {
  (*r->mutable_parameters())[key].set_string_param(v);
}

void SetBool(ModelInferResponse* r, const char* key, bool v) {
  (*r->mutable_parameters())[key].set_bool_param(v);
}

}  // namespace

std::string DatatypeName(v1::DType dtype) { return absl::AsciiStrToUpper(DTypeShortName(dtype)); }

absl::StatusOr<InferPlan> TranslateRequest(const Model& model, ModelInferRequest* request) {
  InferPlan plan;
  plan.run.set_implementation(model.implementation);
  // Parameters first: the mode decides which outputs exist.
  for (const auto& [key, value] : request->parameters()) {
    if (absl::Status s = ApplyParameter(key, value, &plan); !s.ok()) return s;
  }
  if (absl::Status s = TranslateInputs(model, request, &plan); !s.ok()) return s;
  if (absl::Status s = ChooseOutputs(model, *request, &plan); !s.ok()) return s;
  return plan;
}

void TranslateResponse(const ModelInferRequest& request, const InferPlan& plan,
                       v1::RunResponse* run, ModelInferResponse* response) {
  response->set_model_name(request.model_name());
  response->set_model_version(kModelVersion);
  response->set_id(request.id());
  for (const std::string& name : plan.outputs) {
    v1::Tensor* tensor = name == kOutput ? run->mutable_output() : run->mutable_residual_out();
    ModelInferResponse::InferOutputTensor* out = response->add_outputs();
    out->set_name(name);
    out->set_datatype(DatatypeName(tensor->dtype()));
    *out->mutable_shape() = tensor->shape();
    response->add_raw_output_contents()->swap(*tensor->mutable_data());
  }

  SetString(response, "device", run->device());
  SetString(response, "implementation", run->implementation());
  SetString(response, "timer", TimerShortName(run->timer()));
  // The verdict in the contract's words (RunResponse.status): "passed", "incorrect",
  // "rejected", or "unchecked" where the outputs were not checked and nothing was caught.
  SetString(response, "status",
            run->status() == v1::RESULT_STATUS_UNSPECIFIED ? "unchecked"
                                                           : ResultStatusShortName(run->status()));
  if (!run->error().empty()) SetString(response, "error", run->error());
  SetString(response, "measured_as", run->measured_as());
  if (run->integrity_flags_size() > 0) {
    SetString(response, "integrity_flags", absl::StrJoin(run->integrity_flags(), "; "));
  }
  SetInt(response, "calls_checked", run->calls_checked());
  const v1::LatencyStats& latency = run->latency();
  SetInt(response, "latency_samples", latency.samples());
  SetDouble(response, "latency_median_seconds", latency.median_seconds());
  SetDouble(response, "latency_mean_seconds", latency.mean_seconds());
  SetDouble(response, "latency_min_seconds", latency.min_seconds());
  SetDouble(response, "latency_max_seconds", latency.max_seconds());
  SetInt(response, "bytes_moved", static_cast<std::int64_t>(run->bytes_moved()));
  SetDouble(response, "bytes_per_second", run->bytes_per_second());
  if (run->sol_size() > 0) {
    // The first figure is against the device-attribute peak where the device has one.
    SetDouble(response, "sol_ratio", run->sol(0).sol_ratio());
    SetDouble(response, "sol_peak_bytes_per_second", run->sol(0).peak_bytes_per_second());
    // Over 100 %: not a fraction of the DRAM roofline, and the reason why (as the CLI says).
    SetBool(response, "sol_above_peak", run->sol(0).above_peak());
    if (run->sol(0).above_peak()) {
      SetString(response, "sol_above_peak_reason", run->sol(0).above_peak_reason());
    }
  }
  SetDouble(response, "queue_seconds", run->timing().queue_seconds());
  SetDouble(response, "server_seconds", run->timing().server_seconds());

  const v1::Correctness& c = run->correctness();
  SetBool(response, "correctness_checked", c.checked());
  if (c.checked()) {
    SetBool(response, "correctness_passed", c.passed());
    SetDouble(response, "max_abs_error", c.max_abs_error());
    SetDouble(response, "max_rel_error", c.max_rel_error());
    SetDouble(response, "matched_ratio", c.matched_ratio());
    SetInt(response, "mismatched", static_cast<std::int64_t>(c.mismatched()));
    if (!c.detail().empty()) SetString(response, "correctness_detail", c.detail());
  }
}

}  // namespace kerneleval::server::oip
