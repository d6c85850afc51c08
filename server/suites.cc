#include "server/suites.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "nlohmann/json.hpp"

namespace kerneleval::server {
namespace {

using nlohmann::json;

constexpr char kOpType[] = "fused_add_rmsnorm";
constexpr std::size_t kMaxNameLength = 128;

// "a" + "b" -> "a.b"; "" + "b" -> "b"; "a" + "[2]" -> "a[2]".
std::string Join(absl::string_view path, absl::string_view child) {
  if (path.empty()) return std::string(child);
  if (!child.empty() && child.front() == '[') return absl::StrCat(path, child);
  return absl::StrCat(path, ".", child);
}

std::string Index(absl::string_view path, std::size_t i) { return absl::StrCat(path, "[", i, "]"); }

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(path.empty() ? std::string(what)
                                                 : absl::StrCat(path, ": ", what));
}

bool IsValidSuiteName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

bool IsKnownAxis(absl::string_view name) { return name == kBatchAxis || name == kHiddenAxis; }

std::string RangeText() { return absl::StrCat("1..", kMaxAxisValue); }

const v1::Axis* FindAxis(const v1::SuiteDefinition& suite, absl::string_view name) {
  for (const v1::Axis& axis : suite.axes()) {
    if (axis.name() == name) return &axis;
  }
  return nullptr;
}

DType KernelDType(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FP16:
      return DType::kFP16;
    case v1::DTYPE_FP32:
      return DType::kFP32;
    default:
      return DType::kBF16;
  }
}

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
      return Invalid(Join(path, item.key()),
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
  if (*text == "bfloat16") return v1::DTYPE_BF16;
  if (*text == "float16") return v1::DTYPE_FP16;
  if (*text == "float32") return v1::DTYPE_FP32;
  return Invalid(
      path, absl::StrCat("unknown dtype \"", *text, "\"; expected bfloat16, float16 or float32"));
}

absl::string_view DTypeText(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BF16:
      return "bfloat16";
    case v1::DTYPE_FP16:
      return "float16";
    case v1::DTYPE_FP32:
      return "float32";
    default:
      return "unspecified";
  }
}

absl::Status ParseAxes(const json& axes, v1::SuiteDefinition* suite) {
  if (absl::Status s = ExpectObject(axes, "axes"); !s.ok()) return s;
  for (const auto& item : axes.items()) {
    if (!IsKnownAxis(item.key())) {
      return Invalid(Join("axes", item.key()), absl::StrCat("unknown axis; the operation has ",
                                                            kBatchAxis, " and ", kHiddenAxis));
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
                     absl::StrCat("must be \"const\" or \"var\", got \"", *type, "\""));
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
      return Invalid(Join(block_name, item.key()),
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
                     absl::StrCat(DTypeText(*tensor_dtype), " differs from ", *dtype_owner, "'s ",
                                  DTypeText(**dtype), "; all tensors share one dtype"));
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
      const std::string axis_path = Join(axes_path, item.key());
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
    const std::string inputs_path = Join(path, "inputs");
    const json& inputs = workload.at("inputs");
    if (absl::Status s = ExpectObject(inputs, inputs_path); !s.ok()) return s;
    for (const auto& item : inputs.items()) {
      const std::string input_path = Join(inputs_path, item.key());
      if (item.key() != "hidden_states" && item.key() != "residual" && item.key() != "weight") {
        return Invalid(input_path, "unknown input; the inputs are hidden_states, residual, weight");
      }
      if (absl::Status s = ExpectObject(item.value(), input_path); !s.ok()) return s;
      if (item.value().contains("seed")) {
        return Invalid(Join(input_path, "seed"),
                       absl::StrCat("per-tensor seeds are not supported; set ", path,
                                    ".seed (each tensor's seed is derived from it and the "
                                    "tensor name)"));
      }
      if (absl::Status s = CheckKeys(item.value(), input_path, {"type"}); !s.ok()) return s;
      if (!item.value().contains("type")) {
        return Invalid(input_path, "missing field type (\"random\")");
      }
      absl::StatusOr<std::string> type =
          GetString(item.value().at("type"), Join(input_path, "type"));
      if (!type.ok()) return type.status();
      if (*type != "random") {
        return Invalid(Join(input_path, "type"),
                       absl::StrCat("only \"random\" inputs are supported, got \"", *type, "\""));
      }
    }
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
  if (*text == "output") return v1::MODE_OUTPUT;
  if (*text == "output_and_residual") return v1::MODE_OUTPUT_AND_RESIDUAL;
  if (*text == "in_place") return v1::MODE_IN_PLACE;
  return Invalid("mode", absl::StrCat("unknown mode \"", *text,
                                      "\"; expected output, output_and_residual or in_place"));
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
                          ? absl::StrCat("duplicate key \"", last_key, "\" at the top level")
                          : absl::StrCat("duplicate key \"", last_key, "\" in the object under \"",
                                         objects.back().first, "\"");
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

absl::StatusOr<v1::SuiteDefinition> ParseSuite(std::string_view text) {
  absl::StatusOr<json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return parsed.status();
  const json& root = *parsed;
  if (!root.is_object()) {
    return Invalid("", absl::StrCat("a suite is a JSON object, got ", JsonTypeName(root)));
  }
  if (absl::Status s = CheckKeys(root, "",
                                 {"name", "op_type", "description", "tags", "mode", "eps", "axes",
                                  "inputs", "outputs", "workloads"});
      !s.ok()) {
    return s;
  }
  for (const char* required : {"name", "op_type", "axes", "inputs", "outputs", "workloads"}) {
    if (!root.contains(required)) {
      return Invalid("", absl::StrCat("missing field ", required));
    }
  }
  v1::SuiteDefinition suite;

  absl::StatusOr<std::string> name = GetString(root.at("name"), "name");
  if (!name.ok()) return name.status();
  if (!IsValidSuiteName(*name)) {
    return Invalid("name", absl::StrCat("must be 1..", kMaxNameLength,
                                        " characters of [A-Za-z0-9_.-], got \"", *name, "\""));
  }
  suite.set_name(*name);

  absl::StatusOr<std::string> op_type = GetString(root.at("op_type"), "op_type");
  if (!op_type.ok()) return op_type.status();
  if (*op_type != kOpType) {
    return Invalid("op_type", absl::StrCat("must be \"", kOpType, "\", got \"", *op_type, "\""));
  }

  if (root.contains("description")) {
    absl::StatusOr<std::string> description = GetString(root.at("description"), "description");
    if (!description.ok()) return description.status();
    suite.set_description(*description);
  }
  if (root.contains("tags")) {
    const json& tags = root.at("tags");
    if (!tags.is_array()) {
      return Invalid("tags", absl::StrCat("must be an array of strings, got ", JsonTypeName(tags)));
    }
    for (std::size_t i = 0; i < tags.size(); ++i) {
      absl::StatusOr<std::string> tag = GetString(tags[i], Index("tags", i));
      if (!tag.ok()) return tag.status();
      suite.add_tags(*tag);
    }
  }

  v1::Mode mode = v1::MODE_OUTPUT;
  if (root.contains("mode")) {
    absl::StatusOr<v1::Mode> parsed_mode = ParseMode(root.at("mode"));
    if (!parsed_mode.ok()) return parsed_mode.status();
    mode = *parsed_mode;
  }
  suite.set_mode(mode);

  suite.set_eps(kDefaultEps);
  if (root.contains("eps")) {
    absl::StatusOr<double> eps = GetNumber(root.at("eps"), "eps");
    if (!eps.ok()) return eps.status();
    if (!std::isfinite(*eps) || *eps <= 0) {
      return Invalid("eps", absl::StrCat("must be finite and > 0, got ", *eps));
    }
    suite.set_eps(*eps);
  }

  if (absl::Status s = ParseAxes(root.at("axes"), &suite); !s.ok()) return s;

  std::optional<v1::DType> dtype;
  std::string dtype_owner;
  const std::vector<TensorSpec> inputs = {{"hidden_states", {kBatchAxis, kHiddenAxis}},
                                          {"residual", {kBatchAxis, kHiddenAxis}},
                                          {"weight", {kHiddenAxis}}};
  if (absl::Status s = ParseTensors(root.at("inputs"), "inputs", inputs,
                                    "the operation's inputs are", &dtype, &dtype_owner);
      !s.ok()) {
    return s;
  }
  std::vector<TensorSpec> outputs = {{"output", {kBatchAxis, kHiddenAxis}}};
  std::string why = "mode output writes";
  if (mode != v1::MODE_OUTPUT) {
    outputs.push_back({"residual_out", {kBatchAxis, kHiddenAxis}});
    why = mode == v1::MODE_IN_PLACE ? "mode in_place declares" : "mode output_and_residual writes";
  }
  if (absl::Status s =
          ParseTensors(root.at("outputs"), "outputs", outputs, why, &dtype, &dtype_owner);
      !s.ok()) {
    return s;
  }
  suite.set_dtype(*dtype);

  const json& workloads = root.at("workloads");
  if (!workloads.is_array()) {
    return Invalid("workloads", absl::StrCat("must be an array, got ", JsonTypeName(workloads)));
  }
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    if (absl::Status s = ParseWorkload(workloads[i], Index("workloads", i), suite.add_workloads());
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateSuite(suite); !s.ok()) return s;
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

absl::StatusOr<std::vector<v1::SuiteDefinition>> LoadSuiteDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (!fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat("suite directory ", dir, " does not exist"));
  }
  if (!fs::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat("suite directory ", dir, " is not a directory"));
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() == ".json" && it->is_regular_file()) files.push_back(it->path());
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot list suite directory ", dir, ": ", error.message()));
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });

  std::vector<v1::SuiteDefinition> suites;
  std::map<std::string, std::string> defined_in;  // suite name -> file
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::InternalError(absl::StrCat("cannot read suite file ", file.string()));
    }
    absl::StatusOr<v1::SuiteDefinition> suite = ParseSuiteJson(text.str(), file.string());
    if (!suite.ok()) return suite.status();
    auto [previous, inserted] = defined_in.emplace(suite->name(), file.string());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), ": name: suite \"",
                                                     suite->name(), "\" is already defined in ",
                                                     previous->second));
    }
    suites.push_back(*std::move(suite));
  }
  return suites;
}

absl::Status ValidateSuite(const v1::SuiteDefinition& suite, std::string_view field_name) {
  const absl::string_view field(field_name.data(), field_name.size());
  if (!suite.name().empty() && !IsValidSuiteName(suite.name())) {
    return Invalid(Join(field, "name"),
                   absl::StrCat("must be 1..", kMaxNameLength,
                                " characters of [A-Za-z0-9_.-], got \"", suite.name(), "\""));
  }
  if (suite.dtype() != v1::DTYPE_BF16 && suite.dtype() != v1::DTYPE_FP16 &&
      suite.dtype() != v1::DTYPE_FP32) {
    return Invalid(Join(field, "dtype"),
                   absl::StrCat("must be DTYPE_BF16, DTYPE_FP16 or DTYPE_FP32, got ",
                                static_cast<int>(suite.dtype())));
  }
  if (!v1::Mode_IsValid(suite.mode())) {
    return Invalid(Join(field, "mode"),
                   absl::StrCat("unknown mode ", static_cast<int>(suite.mode())));
  }
  // The kernels compute in fp32: an eps that rounds to 0 or overflows there is refused too.
  if (!std::isfinite(suite.eps()) || suite.eps() < 0 ||
      (suite.eps() > 0 &&
       !(static_cast<float>(suite.eps()) > 0 && std::isfinite(static_cast<float>(suite.eps()))))) {
    return Invalid(Join(field, "eps"), absl::StrCat("must be finite and > 0 (0 = default ",
                                                    kDefaultEps, "), got ", suite.eps()));
  }

  const std::string axes_path = Join(field, "axes");
  std::set<std::string> seen_axes;
  for (int i = 0; i < suite.axes_size(); ++i) {
    const v1::Axis& axis = suite.axes(i);
    const std::string path = Index(axes_path, i);
    if (!IsKnownAxis(axis.name())) {
      return Invalid(path, absl::StrCat("unknown axis \"", axis.name(), "\"; the operation has ",
                                        kBatchAxis, " and ", kHiddenAxis));
    }
    if (!seen_axes.insert(axis.name()).second) {
      return Invalid(path, absl::StrCat("duplicate axis ", axis.name()));
    }
    if (axis.is_const() && (axis.value() < 1 || axis.value() > kMaxAxisValue)) {
      return Invalid(Join(path, "value"), absl::StrCat(axis.name(), " must be in ", RangeText(),
                                                       ", got ", axis.value()));
    }
    if (!axis.is_const() && axis.value() != 0) {
      return Invalid(
          Join(path, "value"),
          absl::StrCat(axis.name(), " is a var axis: its value comes from each workload, got ",
                       axis.value()));
    }
  }
  for (const char* name : {kBatchAxis, kHiddenAxis}) {
    if (seen_axes.count(name) == 0) return Invalid(axes_path, absl::StrCat("missing axis ", name));
  }

  const std::string workloads_path = Join(field, "workloads");
  if (suite.workloads_size() == 0) {
    return Invalid(workloads_path, "at least one workload is required");
  }
  if (suite.workloads_size() > kMaxWorkloads) {
    return Invalid(workloads_path, absl::StrCat("at most ", kMaxWorkloads, " workloads, got ",
                                                suite.workloads_size()));
  }
  const DType dtype = KernelDType(suite.dtype());
  const bool writes_residual =
      suite.mode() == v1::MODE_OUTPUT_AND_RESIDUAL || suite.mode() == v1::MODE_IN_PLACE;
  std::map<std::string, int> names;  // workload name -> index
  for (int i = 0; i < suite.workloads_size(); ++i) {
    const v1::Workload& workload = suite.workloads(i);
    const std::string path = Index(workloads_path, i);
    const std::string path_axes = Join(path, "axes");
    // Sorted, so that the message does not depend on the map's iteration order.
    std::map<std::string, std::int64_t> axes(workload.axes().begin(), workload.axes().end());
    for (const auto& [name, value] : axes) {
      const std::string axis_path = Join(path_axes, name);
      const v1::Axis* axis = FindAxis(suite, name);
      if (axis == nullptr) {
        return Invalid(axis_path, absl::StrCat("unknown axis; the suite's axes are ", kBatchAxis,
                                               " and ", kHiddenAxis));
      }
      if (axis->is_const()) {
        return Invalid(axis_path, absl::StrCat(name, " is a const axis (", axis->value(),
                                               "); a workload sets only var axes"));
      }
      if (value < 1 || value > kMaxAxisValue) {
        return Invalid(axis_path,
                       absl::StrCat("must be an integer in ", RangeText(), ", got ", value));
      }
    }
    for (const v1::Axis& axis : suite.axes()) {
      if (!axis.is_const() && axes.count(axis.name()) == 0) {
        return Invalid(path_axes, absl::StrCat("missing var axis ", axis.name()));
      }
    }
    absl::StatusOr<WorkloadShape> shape = ResolveShape(suite, workload);
    if (!shape.ok()) return Invalid(path, shape.status().message());
    // Both sides are below 2^31, so tensors * batch * hidden + hidden stays below 2^64.
    const std::uint64_t elements = (writes_residual ? 4u : 3u) *
                                       static_cast<std::uint64_t>(shape->batch) *
                                       static_cast<std::uint64_t>(shape->hidden) +
                                   static_cast<std::uint64_t>(shape->hidden);
    if (elements >
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ElementSize(dtype)) {
      return Invalid(
          path, absl::StrCat(kBatchAxis, " ", shape->batch, " x ", kHiddenAxis, " ", shape->hidden,
                             " is too large: the bytes moved overflow 64 bits"));
    }

    const v1::Tolerance& tol = workload.tolerance();
    const std::string tol_path = Join(path, "tolerance");
    for (const auto& [key, value] :
         {std::pair<const char*, double>{"atol", tol.atol()}, {"rtol", tol.rtol()}}) {
      if (!std::isfinite(value) || value < 0) {
        return Invalid(Join(tol_path, key), absl::StrCat("must be finite and >= 0, got ", value));
      }
    }
    if (!(tol.required_matched_ratio() >= 0 && tol.required_matched_ratio() <= 1)) {
      return Invalid(Join(tol_path, "required_matched_ratio"),
                     absl::StrCat("must be in [0, 1], got ", tol.required_matched_ratio()));
    }

    const std::string name = WorkloadName(suite, workload);
    if (name.size() > kMaxNameLength) {
      return Invalid(Join(path, "name"),
                     absl::StrCat("at most ", kMaxNameLength, " characters, got ", name.size()));
    }
    auto [previous, inserted] = names.emplace(name, i);
    if (!inserted) {
      return Invalid(Join(path, "name"),
                     absl::StrCat("duplicate workload name \"", name, "\" (also ",
                                  Index(workloads_path, previous->second), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkloadShape> ResolveShape(const v1::SuiteDefinition& suite,
                                           const v1::Workload& workload) {
  std::int64_t values[2] = {0, 0};
  const char* names[2] = {kBatchAxis, kHiddenAxis};
  for (int k = 0; k < 2; ++k) {
    const v1::Axis* axis = FindAxis(suite, names[k]);
    if (axis == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("the suite has no axis ", names[k]));
    }
    if (axis->is_const()) {
      values[k] = axis->value();
    } else {
      const auto it = workload.axes().find(names[k]);
      if (it == workload.axes().end()) {
        return absl::InvalidArgumentError(absl::StrCat("missing var axis ", names[k]));
      }
      values[k] = it->second;
    }
    if (values[k] < 1 || values[k] > kMaxAxisValue) {
      return absl::InvalidArgumentError(
          absl::StrCat(names[k], " must be in ", RangeText(), ", got ", values[k]));
    }
  }
  return WorkloadShape{values[0], values[1]};
}

std::string WorkloadName(const v1::SuiteDefinition& suite, const v1::Workload& workload) {
  if (!workload.name().empty()) return workload.name();
  const bool any_var = std::any_of(suite.axes().begin(), suite.axes().end(),
                                   [](const v1::Axis& axis) { return !axis.is_const(); });
  std::vector<std::string> parts;
  for (const v1::Axis& axis : suite.axes()) {
    if (axis.is_const()) {
      if (!any_var) parts.push_back(absl::StrCat(axis.name(), "=", axis.value()));
      continue;
    }
    const auto it = workload.axes().find(axis.name());
    parts.push_back(it == workload.axes().end() ? absl::StrCat(axis.name(), "=?")
                                                : absl::StrCat(axis.name(), "=", it->second));
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace kerneleval::server
