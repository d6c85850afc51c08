// The suite file format: FlashInfer-Bench-like JSON read into v1::SuiteDefinition.
#include "common/suites.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/bounded_text.h"
#include "common/conversions.h"
#include "common/status_macros.h"
#include "common/suite_paths.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "nlohmann/json.hpp"

namespace kerneleval {
using namespace suite_internal;  // NOLINT: this file is one of the suite helpers' users
namespace {

using nlohmann::json;

// --- JSON reading -----------------------------------------------------------------------

absl::string_view JsonTypeName(const json& value) {
  if (value.is_number_integer()) return "integer";
  return value.type_name();
}

// Fails on keys of `object` outside `allowed`, naming the first one (keys come sorted).
absl::Status CheckKeys(const json& object, absl::string_view path,
                       std::initializer_list<absl::string_view> allowed) {
  for (const auto& item : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      return Invalid(Join(path, EchoKey(item.key())),
                     absl::StrCat("unknown field; expected one of ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectObject(const json& value, absl::string_view path) {
  if (value.is_object()) return absl::OkStatus();
  return Invalid(path, absl::StrCat("must be an object, got ", JsonTypeName(value)));
}

absl::StatusOr<std::string> GetString(const json& value, absl::string_view path) {
  if (!value.is_string()) {
    return Invalid(path, absl::StrCat("must be a string, got ", JsonTypeName(value)));
  }
  return value.get<std::string>();
}

absl::StatusOr<double> GetNumber(const json& value, absl::string_view path) {
  if (!value.is_number()) {
    return Invalid(path, absl::StrCat("must be a number, got ", JsonTypeName(value)));
  }
  return value.get<double>();
}

// An integer in [lo, hi]; JSON numbers written with a fraction or exponent are refused so that
// 1e3 or 64.0 cannot stand for a size by accident.
absl::StatusOr<std::int64_t> GetInteger(const json& value, absl::string_view path, std::int64_t lo,
                                        std::int64_t hi) {
  const std::string range = absl::StrCat("must be an integer in ", lo, "..", hi);
  if (!value.is_number_integer()) {
    return Invalid(path, absl::StrCat(range, ", got ", value.dump()));
  }
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    return Invalid(path, absl::StrCat(range, ", got ", value.dump()));
  }
  const std::int64_t v = value.get<std::int64_t>();
  if (v < lo || v > hi) return Invalid(path, absl::StrCat(range, ", got ", v));
  return v;
}

absl::StatusOr<v1::DType> ParseDType(const json& value, absl::string_view path) {
  absl::StatusOr<std::string> text = GetString(value, path);
  if (!text.ok()) return text.status();
  for (v1::DType d : {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32}) {
    if (*text == DTypeFileName(d)) return d;
  }
  return Invalid(path, absl::StrCat("unknown dtype ", Quote(*text),
                                    "; expected bfloat16, float16 or float32"));
}

absl::Status ParseAxes(const json& axes, v1::SuiteDefinition* suite) {
  if (absl::Status s = ExpectObject(axes, "axes"); !s.ok()) return s;
  for (const auto& item : axes.items()) {
    if (!IsKnownAxis(item.key())) {
      return Invalid(
          Join("axes", EchoKey(item.key())),
          absl::StrCat("unknown axis; the operation has ", kBatchAxis, " and ", kHiddenAxis));
    }
  }
  for (const char* name : {kBatchAxis, kHiddenAxis}) {
    const std::string path = Join("axes", name);
    if (!axes.contains(name)) return Invalid("axes", absl::StrCat("missing axis ", name));
    const json& spec = axes.at(name);
    if (absl::Status s = ExpectObject(spec, path); !s.ok()) return s;
    if (absl::Status s = CheckKeys(spec, path, {"type", "value", "description"}); !s.ok()) {
      return s;
    }
    if (!spec.contains("type")) return Invalid(path, "missing field type (\"const\" or \"var\")");
    absl::StatusOr<std::string> type = GetString(spec.at("type"), Join(path, "type"));
    if (!type.ok()) return type.status();
    v1::Axis* axis = suite->add_axes();
    axis->set_name(name);
    if (*type == "const") {
      if (!spec.contains("value")) return Invalid(path, "a const axis needs a value");
      absl::StatusOr<std::int64_t> value =
          GetInteger(spec.at("value"), Join(path, "value"), 1, kMaxAxisValue);
      if (!value.ok()) return value.status();
      axis->set_is_const(true);
      axis->set_value(*value);
    } else if (*type == "var") {
      if (spec.contains("value")) {
        return Invalid(Join(path, "value"),
                       "a var axis has no value; each workload sets it under \"axes\"");
      }
    } else {
      return Invalid(Join(path, "type"),
                     absl::StrCat("must be \"const\" or \"var\", got ", Quote(*type)));
    }
  }
  return absl::OkStatus();
}

struct TensorSpec {
  absl::string_view name;
  std::vector<absl::string_view> shape;
};

// Checks a block of tensor declarations against the names and shapes the operation has, and
// that every tensor has the same dtype as the first one seen (`dtype`, set on first use).
absl::Status ParseTensors(const json& block, absl::string_view block_name,
                          const std::vector<TensorSpec>& expected, absl::string_view why,
                          std::optional<v1::DType>* dtype, std::string* dtype_owner) {
  if (absl::Status s = ExpectObject(block, block_name); !s.ok()) return s;
  std::vector<absl::string_view> names;
  for (const TensorSpec& spec : expected) names.push_back(spec.name);
  for (const auto& item : block.items()) {
    if (std::find(names.begin(), names.end(), item.key()) == names.end()) {
      return Invalid(Join(block_name, EchoKey(item.key())),
                     absl::StrCat("unexpected tensor; ", why, ": ", absl::StrJoin(names, ", ")));
    }
  }
  for (const TensorSpec& spec : expected) {
    const std::string path = Join(block_name, spec.name);
    if (!block.contains(std::string(spec.name))) {
      return Invalid(block_name, absl::StrCat("missing tensor ", spec.name, "; ", why, ": ",
                                              absl::StrJoin(names, ", ")));
    }
    const json& tensor = block.at(std::string(spec.name));
    if (absl::Status s = ExpectObject(tensor, path); !s.ok()) return s;
    if (absl::Status s = CheckKeys(tensor, path, {"shape", "dtype", "description"}); !s.ok()) {
      return s;
    }
    const std::string expected_shape =
        absl::StrCat("[\"", absl::StrJoin(spec.shape, "\", \""), "\"]");
    if (!tensor.contains("shape")) {
      return Invalid(path, absl::StrCat("missing field shape; expected ", expected_shape));
    }
    const json& shape = tensor.at("shape");
    bool shape_ok = shape.is_array() && shape.size() == spec.shape.size();
    for (std::size_t i = 0; shape_ok && i < spec.shape.size(); ++i) {
      shape_ok = shape[i].is_string() && shape[i].get<std::string>() == spec.shape[i];
    }
    if (!shape_ok) {
      return Invalid(Join(path, "shape"),
                     absl::StrCat("must be ", expected_shape, ", got ", shape.dump()));
    }
    if (!tensor.contains("dtype")) return Invalid(path, "missing field dtype");
    absl::StatusOr<v1::DType> tensor_dtype = ParseDType(tensor.at("dtype"), Join(path, "dtype"));
    if (!tensor_dtype.ok()) return tensor_dtype.status();
    if (!dtype->has_value()) {
      *dtype = *tensor_dtype;
      *dtype_owner = path;
    } else if (**dtype != *tensor_dtype) {
      return Invalid(Join(path, "dtype"),
                     absl::StrCat(DTypeFileName(*tensor_dtype), " differs from ", *dtype_owner,
                                  "'s ", DTypeFileName(**dtype), "; all tensors share one dtype"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTolerance(const json& tolerance, absl::string_view path, v1::Tolerance* out) {
  if (absl::Status s = ExpectObject(tolerance, path); !s.ok()) return s;
  if (absl::Status s =
          CheckKeys(tolerance, path, {"max_atol", "max_rtol", "required_matched_ratio"});
      !s.ok()) {
    return s;
  }
  for (const char* key : {"max_atol", "max_rtol", "required_matched_ratio"}) {
    if (!tolerance.contains(key)) continue;
    const std::string key_path = Join(path, key);
    absl::StatusOr<double> value = GetNumber(tolerance.at(key), key_path);
    if (!value.ok()) return value.status();
    const bool ratio = absl::string_view(key) == "required_matched_ratio";
    if (!std::isfinite(*value) || *value < 0 || (ratio && *value > 1)) {
      return Invalid(key_path,
                     absl::StrCat(ratio ? "must be in [0, 1]" : "must be >= 0", ", got ", *value));
    }
    if (absl::string_view(key) == "max_atol") out->set_atol(*value);
    if (absl::string_view(key) == "max_rtol") out->set_rtol(*value);
    if (ratio) out->set_required_matched_ratio(*value);
  }
  return absl::OkStatus();
}

// A workload's inputs block names only the operation's inputs, each "random": every tensor's
// seed is derived from the workload's seed and the tensor's name.
absl::Status CheckWorkloadInputs(const json& inputs, absl::string_view workload_path) {
  const std::string inputs_path = Join(workload_path, "inputs");
  if (absl::Status s = ExpectObject(inputs, inputs_path); !s.ok()) return s;
  for (const auto& item : inputs.items()) {
    const std::string input_path = Join(inputs_path, EchoKey(item.key()));
    if (item.key() != "hidden_states" && item.key() != "residual" && item.key() != "weight") {
      return Invalid(input_path, "unknown input; the inputs are hidden_states, residual, weight");
    }
    if (absl::Status s = ExpectObject(item.value(), input_path); !s.ok()) return s;
    if (item.value().contains("seed")) {
      return Invalid(Join(input_path, "seed"),
                     absl::StrCat("per-tensor seeds are not supported; set ", workload_path,
                                  ".seed (each tensor's seed is derived from it and the "
                                  "tensor name)"));
    }
    if (absl::Status s = CheckKeys(item.value(), input_path, {"type"}); !s.ok()) return s;
    if (!item.value().contains("type")) {
      return Invalid(input_path, "missing field type (\"random\")");
    }
    absl::StatusOr<std::string> type = GetString(item.value().at("type"), Join(input_path, "type"));
    if (!type.ok()) return type.status();
    if (*type != "random") {
      return Invalid(Join(input_path, "type"),
                     absl::StrCat("only \"random\" inputs are supported, got ", Quote(*type)));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseWorkload(const json& workload, absl::string_view path, v1::Workload* out) {
  if (absl::Status s = ExpectObject(workload, path); !s.ok()) return s;
  if (absl::Status s = CheckKeys(workload, path, {"name", "axes", "seed", "inputs", "tolerance"});
      !s.ok()) {
    return s;
  }
  if (workload.contains("name")) {
    absl::StatusOr<std::string> name = GetString(workload.at("name"), Join(path, "name"));
    if (!name.ok()) return name.status();
    if (name->empty()) {
      return Invalid(Join(path, "name"), "must not be empty (leave it out to generate one)");
    }
    out->set_name(*name);
  }
  if (workload.contains("axes")) {
    const std::string axes_path = Join(path, "axes");
    const json& axes = workload.at("axes");
    if (absl::Status s = ExpectObject(axes, axes_path); !s.ok()) return s;
    // Only the JSON type is checked here; which axes a workload may set, and their range, is
    // ValidateSuite's job so that files and requests get the same rules and messages.
    for (const auto& item : axes.items()) {
      const std::string axis_path = Join(axes_path, EchoKey(item.key()));
      if (!item.value().is_number_integer() ||
          (item.value().is_number_unsigned() &&
           item.value().get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxAxisValue))) {
        return Invalid(axis_path, absl::StrCat("must be an integer in ", RangeText(), ", got ",
                                               item.value().dump()));
      }
      (*out->mutable_axes())[item.key()] = item.value().get<std::int64_t>();
    }
  }
  if (workload.contains("seed")) {
    const json& seed = workload.at("seed");
    if (!seed.is_number_unsigned()) {
      return Invalid(Join(path, "seed"),
                     absl::StrCat("must be an integer in 0..2^64-1, got ", seed.dump()));
    }
    out->set_seed(seed.get<std::uint64_t>());
  }
  if (workload.contains("inputs")) {
    RETURN_IF_ERROR(CheckWorkloadInputs(workload.at("inputs"), path));
  }
  if (workload.contains("tolerance")) {
    if (absl::Status s = ParseTolerance(workload.at("tolerance"), Join(path, "tolerance"),
                                        out->mutable_tolerance());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Mode> ParseMode(const json& value) {
  absl::StatusOr<std::string> text = GetString(value, "mode");
  if (!text.ok()) return text.status();
  if (std::optional<v1::Mode> mode = ParseModeName(*text)) return *mode;
  return Invalid("mode", absl::StrCat("unknown mode ", Quote(*text),
                                      "; expected output, output_and_residual or in_place"));
}

// Parses `text`, refusing repeated keys in an object (nlohmann keeps the last one silently,
// which would hide a typo such as two "batch_size" entries).
absl::StatusOr<json> ParseJsonText(std::string_view text) {
  std::vector<std::pair<std::string, std::set<std::string>>> objects;  // (key in parent, keys)
  std::string last_key;
  std::string duplicate;
  const json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        objects.emplace_back(last_key, std::set<std::string>());
        break;
      case json::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!objects.empty() && !objects.back().second.insert(last_key).second &&
            duplicate.empty()) {
          duplicate = objects.back().first.empty()
                          ? absl::StrCat("duplicate key ", Quote(last_key), " at the top level")
                          : absl::StrCat("duplicate key ", Quote(last_key), " in the object under ",
                                         Quote(objects.back().first));
        }
        break;
      case json::parse_event_t::object_end:
        if (!objects.empty()) {
          last_key = objects.back().first;
          objects.pop_back();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    // parse_error (malformed text) and out_of_range (a number beyond double) alike.
    // e.what() reads "[json.exception.parse_error.101] parse error at line L, column C: ...".
    absl::string_view what(e.what());
    if (const std::size_t end = what.find("] "); end != absl::string_view::npos) {
      what.remove_prefix(end + 2);
    }
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", what));
  }
  if (!duplicate.empty()) return absl::InvalidArgumentError(duplicate);
  return root;
}

// The top level is an object of the known fields, the required ones present.
absl::Status CheckSuiteRoot(const json& root) {
  if (!root.is_object()) {
    return Invalid("", absl::StrCat("a suite is a JSON object, got ", JsonTypeName(root)));
  }
  RETURN_IF_ERROR(CheckKeys(root, "",
                            {"name", "op_type", "description", "tags", "mode", "eps", "axes",
                             "inputs", "outputs", "workloads"}));
  for (const char* required : {"name", "op_type", "axes", "inputs", "outputs", "workloads"}) {
    if (!root.contains(required)) {
      return Invalid("", absl::StrCat("missing field ", required));
    }
  }
  return absl::OkStatus();
}

// name, op_type, description and tags: what names and describes the suite.
absl::Status ParseIdentity(const json& root, v1::SuiteDefinition* suite) {
  absl::StatusOr<std::string> name = GetString(root.at("name"), "name");
  if (!name.ok()) return name.status();
  if (!IsValidSuiteName(*name)) {
    return Invalid("name", absl::StrCat("must be 1..", kMaxNameLength,
                                        " characters of [A-Za-z0-9_.-], got ", Quote(*name)));
  }
  suite->set_name(*name);

  absl::StatusOr<std::string> op_type = GetString(root.at("op_type"), "op_type");
  if (!op_type.ok()) return op_type.status();
  if (*op_type != kOpType) {
    return Invalid("op_type", absl::StrCat("must be \"", kOpType, "\", got ", Quote(*op_type)));
  }

  if (root.contains("description")) {
    absl::StatusOr<std::string> description = GetString(root.at("description"), "description");
    if (!description.ok()) return description.status();
    suite->set_description(*description);
  }
  if (root.contains("tags")) {
    const json& tags = root.at("tags");
    if (!tags.is_array()) {
      return Invalid("tags", absl::StrCat("must be an array of strings, got ", JsonTypeName(tags)));
    }
    for (std::size_t i = 0; i < tags.size(); ++i) {
      absl::StatusOr<std::string> tag = GetString(tags[i], Index("tags", i));
      if (!tag.ok()) return tag.status();
      suite->add_tags(*tag);
    }
  }
  return absl::OkStatus();
}

// mode and eps, each with its default when left out.
absl::Status ParseComputation(const json& root, v1::SuiteDefinition* suite) {
  v1::Mode mode = v1::MODE_OUTPUT;
  if (root.contains("mode")) {
    absl::StatusOr<v1::Mode> parsed_mode = ParseMode(root.at("mode"));
    if (!parsed_mode.ok()) return parsed_mode.status();
    mode = *parsed_mode;
  }
  suite->set_mode(mode);

  suite->set_eps(kDefaultEps);
  if (root.contains("eps")) {
    absl::StatusOr<double> eps = GetNumber(root.at("eps"), "eps");
    if (!eps.ok()) return eps.status();
    if (!std::isfinite(*eps) || *eps <= 0) {
      return Invalid("eps", absl::StrCat("must be finite and > 0, got ", *eps));
    }
    suite->set_eps(*eps);
  }
  return absl::OkStatus();
}

// The inputs and outputs blocks, whose tensors the suite's mode fixes; their shared dtype
// becomes the suite's.
absl::Status ParseSuiteTensors(const json& root, v1::SuiteDefinition* suite) {
  std::optional<v1::DType> dtype;
  std::string dtype_owner;
  const std::vector<TensorSpec> inputs = {{"hidden_states", {kBatchAxis, kHiddenAxis}},
                                          {"residual", {kBatchAxis, kHiddenAxis}},
                                          {"weight", {kHiddenAxis}}};
  RETURN_IF_ERROR(ParseTensors(root.at("inputs"), "inputs", inputs, "the operation's inputs are",
                               &dtype, &dtype_owner));
  std::vector<TensorSpec> outputs = {{"output", {kBatchAxis, kHiddenAxis}}};
  std::string why = "mode output writes";
  if (suite->mode() != v1::MODE_OUTPUT) {
    outputs.push_back({"residual_out", {kBatchAxis, kHiddenAxis}});
    why = suite->mode() == v1::MODE_IN_PLACE ? "mode in_place declares"
                                             : "mode output_and_residual writes";
  }
  RETURN_IF_ERROR(ParseTensors(root.at("outputs"), "outputs", outputs, why, &dtype, &dtype_owner));
  suite->set_dtype(*dtype);
  return absl::OkStatus();
}

absl::Status ParseWorkloads(const json& workloads, v1::SuiteDefinition* suite) {
  if (!workloads.is_array()) {
    return Invalid("workloads", absl::StrCat("must be an array, got ", JsonTypeName(workloads)));
  }
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    RETURN_IF_ERROR(ParseWorkload(workloads[i], Index("workloads", i), suite->add_workloads()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SuiteDefinition> ParseSuite(std::string_view text) {
  absl::StatusOr<json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return parsed.status();
  const json& root = *parsed;
  RETURN_IF_ERROR(CheckSuiteRoot(root));
  v1::SuiteDefinition suite;
  RETURN_IF_ERROR(ParseIdentity(root, &suite));
  RETURN_IF_ERROR(ParseComputation(root, &suite));
  RETURN_IF_ERROR(ParseAxes(root.at("axes"), &suite));
  RETURN_IF_ERROR(ParseSuiteTensors(root, &suite));
  RETURN_IF_ERROR(ParseWorkloads(root.at("workloads"), &suite));
  RETURN_IF_ERROR(ValidateSuite(suite));
  return suite;
}

}  // namespace

absl::StatusOr<v1::SuiteDefinition> ParseSuiteJson(std::string_view text, std::string_view source) {
  absl::StatusOr<v1::SuiteDefinition> suite = ParseSuite(text);
  if (!suite.ok()) {
    return absl::Status(suite.status().code(),
                        absl::StrCat(absl::string_view(source.data(), source.size()), ": ",
                                     suite.status().message()));
  }
  return suite;
}

}  // namespace kerneleval
