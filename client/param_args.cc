#include "client/param_args.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/enum_names.h"

namespace kerneleval::client {
namespace {

const google::protobuf::EnumDescriptor& Sources() { return *v1::ParamSource_descriptor(); }

// A caller's text in a message: at most 48 bytes of it.
std::string Bounded(const std::string& text) {
  return text.size() <= 48 ? text : absl::StrCat(text.substr(0, 48), "...");
}

absl::Status Refuse(const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--arg '", Bounded(text), "': ", why));
}

// VALUE without the ones that take an argument (int:, float:, scratch:).
std::optional<v1::ParamSource> SourceNamed(const std::string& name) {
  for (int i = 0; i < Sources().value_count(); ++i) {
    const int number = Sources().value(i)->number();
    if (number != v1::PARAM_SOURCE_UNSPECIFIED && EnumShortName(Sources(), number) == name) {
      return static_cast<v1::ParamSource>(number);
    }
  }
  return std::nullopt;
}

// One VALUE (no struct) into `p`'s source and argument.
absl::Status ParseValue(const std::string& text, const std::string& value, v1::KernelParam* out) {
  v1::KernelParam& p = *out;
  const std::string accepted =
      absl::StrCat("give NAME=VALUE, VALUE one of ", absl::StrJoin(ParamSourceNames(), ", "));
  const std::size_t colon = value.find(':');
  const std::string head = absl::AsciiStrToLower(value.substr(0, colon));
  const std::string argument = colon == std::string::npos ? "" : value.substr(colon + 1);
  if (head == "int") {
    std::int64_t n = 0;
    if (!absl::SimpleAtoi(argument, &n)) return Refuse(text, "int:N takes a whole number");
    p.set_source(v1::PARAM_SOURCE_INT);
    p.set_int_value(n);
  } else if (head == "float") {
    double x = 0;
    if (!absl::SimpleAtod(argument, &x)) return Refuse(text, "float:X takes a number");
    p.set_source(v1::PARAM_SOURCE_FLOAT);
    p.set_float_value(x);
  } else if (head == "scratch") {
    std::uint64_t bytes = 0;
    if (!absl::SimpleAtoi(argument, &bytes)) return Refuse(text, "scratch:BYTES takes a size");
    p.set_source(v1::PARAM_SOURCE_SCRATCH);
    p.set_scratch_bytes(bytes);
  } else if (const std::optional<v1::ParamSource> source = SourceNamed(head);
             source.has_value() && colon == std::string::npos) {
    if (*source == v1::PARAM_SOURCE_STRUCT) {
      return Refuse(text, "a struct lists its fields: struct(VALUE[:i32|i64|f32|f64], ...)");
    }
    p.set_source(*source);
  } else {
    return Refuse(text, absl::StrCat("unknown value '", Bounded(value), "'; ", accepted));
  }
  return absl::OkStatus();
}

// struct(FIELD, ...): FIELD is a VALUE with its size after a last ':' (i32, i64, f32, f64;
// a pointer needs none), e.g. struct(hidden_states, batch:i32, hidden:i32,
// hidden_states_stride:i64), a CuTe DSL tensor of dynamic (batch, hidden) layout.
absl::Status ParseStruct(const std::string& text, const std::string& value, v1::KernelParam* p) {
  if (value.back() != ')') return Refuse(text, "struct(...) must end with ')'");
  p->set_source(v1::PARAM_SOURCE_STRUCT);
  const std::string inside = value.substr(7, value.size() - 8);
  for (absl::string_view part : absl::StrSplit(inside, ',')) {
    std::string field_text(absl::StripAsciiWhitespace(part));
    std::uint32_t bytes = 0;
    if (const std::size_t colon = field_text.rfind(':'); colon != std::string::npos) {
      const std::string type = absl::AsciiStrToLower(field_text.substr(colon + 1));
      if (type == "i32" || type == "f32") bytes = 4;
      if (type == "i64" || type == "f64") bytes = 8;
      if (bytes != 0) field_text.resize(colon);
    }
    v1::KernelParam one;
    if (absl::Status s = ParseValue(text, field_text, &one); !s.ok()) return s;
    if (one.source() == v1::PARAM_SOURCE_SCRATCH) {
      return Refuse(text, "scratch cannot be a struct's field; bind it as a parameter of its own");
    }
    v1::StructField* field = p->add_fields();
    field->set_source(one.source());
    field->set_bytes(bytes);
    field->set_int_value(one.int_value());
    field->set_float_value(one.float_value());
  }
  return absl::OkStatus();
}

// "hidden", "int:4", "float:0.5": a parameter's or a struct field's value as --arg reads it.
template <typename Bound>
std::string ValueText(const Bound& b) {
  std::string value = EnumShortName(Sources(), b.source());
  if (b.source() == v1::PARAM_SOURCE_INT) absl::StrAppend(&value, ":", b.int_value());
  if (b.source() == v1::PARAM_SOURCE_FLOAT) absl::StrAppend(&value, ":", b.float_value());
  return value;
}

// "struct(hidden_states, batch:i32, ...)", as --arg reads it.
std::string FormatStruct(const v1::KernelParam& p) {
  std::vector<std::string> fields;
  for (const v1::StructField& f : p.fields()) {
    std::string field = ValueText(f);
    const bool is_float = f.source() == v1::PARAM_SOURCE_FLOAT ||
                          f.source() == v1::PARAM_SOURCE_EPS ||
                          f.source() == v1::PARAM_SOURCE_INV_HIDDEN;
    if (f.bytes() != 0) absl::StrAppend(&field, ":", is_float ? "f" : "i", f.bytes() * 8);
    fields.push_back(std::move(field));
  }
  return absl::StrCat("struct(", absl::StrJoin(fields, ", "), ")");
}

}  // namespace

std::vector<std::string> ParamSourceNames() {
  std::vector<std::string> names;
  for (int i = 0; i < Sources().value_count(); ++i) {
    const int number = Sources().value(i)->number();
    if (number == v1::PARAM_SOURCE_UNSPECIFIED) continue;
    std::string name = EnumShortName(Sources(), number);
    if (number == v1::PARAM_SOURCE_INT) name = "int:N";
    if (number == v1::PARAM_SOURCE_FLOAT) name = "float:X";
    if (number == v1::PARAM_SOURCE_SCRATCH) name = "scratch:BYTES";
    if (number == v1::PARAM_SOURCE_STRUCT) name = "struct(VALUE[:i32|i64|f32|f64], ...)";
    names.push_back(std::move(name));
  }
  return names;
}

absl::StatusOr<ParsedParamArg> ParseParamArg(const std::string& text) {
  ParsedParamArg parsed;
  std::string rest = text;
  // K: a kernel index before the first ':' when it is all digits and comes before any '='.
  if (const std::size_t colon = rest.find(':');
      colon != std::string::npos && colon < rest.find('=') && colon > 0) {
    int kernel = 0;
    if (absl::SimpleAtoi(rest.substr(0, colon), &kernel)) {
      if (kernel < 0 || kernel > 3) return Refuse(text, "a kernel index is 0 to 3");
      parsed.kernel = kernel;
      rest = rest.substr(colon + 1);
    }
  }
  std::string value = rest;
  if (const std::size_t eq = rest.find('='); eq != std::string::npos) {
    parsed.param.set_name(rest.substr(0, eq));
    value = rest.substr(eq + 1);
  }
  if (absl::StartsWith(value, "struct(")) {
    if (absl::Status s = ParseStruct(text, value, &parsed.param); !s.ok()) return s;
  } else if (absl::Status s = ParseValue(text, value, &parsed.param); !s.ok()) {
    return s;
  }
  return parsed;
}

std::string FormatParamBinding(const v1::KernelLaunch& kernel) {
  std::vector<std::string> parts;
  for (const v1::KernelParam& p : kernel.params()) {
    std::string value = ValueText(p);
    if (p.source() == v1::PARAM_SOURCE_SCRATCH) absl::StrAppend(&value, ":", p.scratch_bytes());
    if (p.source() == v1::PARAM_SOURCE_STRUCT) value = FormatStruct(p);
    parts.push_back(p.name().empty() ? value : absl::StrCat(p.name(), "=", value));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace kerneleval::client
