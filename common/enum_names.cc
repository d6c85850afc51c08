#include "common/enum_names.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace kerneleval {
namespace {

// One row per value: the printed name, then up to three aliases (empty = none). `askable`
// marks the values a caller may choose (the choices listed in flags and messages).
template <typename Enum>
struct Row {
  Enum value;
  std::string_view name;
  bool askable;
  std::array<std::string_view, 3> aliases = {};
};

constexpr Row<v1::DType> kDTypes[] = {
    {v1::DTYPE_UNSPECIFIED, "unspecified", false},
    {v1::DTYPE_BF16, "bf16", true, {"bfloat16"}},
    {v1::DTYPE_FP16, "fp16", true, {"float16", "half"}},
    {v1::DTYPE_FP32, "fp32", true, {"float32", "float"}},
};

// MODE_UNSPECIFIED is MODE_OUTPUT by the contract, so it prints as "output" and is never
// what a name parses to.
constexpr Row<v1::Mode> kModes[] = {
    {v1::MODE_OUTPUT, "output", true},
    {v1::MODE_OUTPUT_AND_RESIDUAL, "output_and_residual", true},
    {v1::MODE_IN_PLACE, "in_place", true},
    {v1::MODE_UNSPECIFIED, "output", false},
};

constexpr Row<v1::Timer> kTimers[] = {
    {v1::TIMER_UNSPECIFIED, "auto", true},
    {v1::TIMER_CUPTI, "cupti", true},
    {v1::TIMER_CUDA_EVENTS, "cuda_events", true, {"events"}},
    {v1::TIMER_HOST_CLOCK, "host_clock", true, {"host"}},
};

// CACHE_MODE_UNSPECIFIED is COLD by the contract.
constexpr Row<v1::CacheMode> kCaches[] = {
    {v1::CACHE_MODE_COLD, "cold", true},
    {v1::CACHE_MODE_HOT, "hot", true},
    {v1::CACHE_MODE_UNSPECIFIED, "cold", false},
};

constexpr Row<v1::ResultStatus> kStatuses[] = {
    {v1::RESULT_STATUS_UNSPECIFIED, "unspecified", false},
    {v1::RESULT_STATUS_PASSED, "passed", false},
    {v1::RESULT_STATUS_INCORRECT, "incorrect", false},
    {v1::RESULT_STATUS_RUNTIME_ERROR, "runtime_error", false},
    {v1::RESULT_STATUS_SKIPPED, "skipped", false},
    {v1::RESULT_STATUS_REJECTED, "rejected", false},
};

constexpr Row<v1::PeakSource> kPeakSources[] = {
    {v1::PEAK_SOURCE_UNSPECIFIED, "unspecified", false},
    {v1::PEAK_SOURCE_DEVICE_ATTRIBUTES, "device_attributes", false},
    {v1::PEAK_SOURCE_DATASHEET, "datasheet", false},
    {v1::PEAK_SOURCE_MEASURED_COPY, "measured_copy", false},
};

// A value outside the table (a newer peer's enum) prints as the table's unspecified name.
template <typename Enum, std::size_t N>
std::string NameIn(const Row<Enum> (&table)[N], Enum value) {
  for (const Row<Enum>& row : table) {
    if (row.value == value) return std::string(row.name);
  }
  for (const Row<Enum>& row : table) {
    if (static_cast<int>(row.value) == 0) return std::string(row.name);
  }
  return "unspecified";
}

// The first row spelled `name` wins, which is why the unspecified rows that share a
// name with a real value come last.
template <typename Enum, std::size_t N>
std::optional<Enum> ParseIn(const Row<Enum> (&table)[N], std::string_view name) {
  for (const Row<Enum>& row : table) {
    if (!row.askable && static_cast<int>(row.value) == 0) continue;
    if (row.name == name) return row.value;
    for (std::string_view alias : row.aliases) {
      if (!alias.empty() && alias == name) return row.value;
    }
  }
  return std::nullopt;
}

template <typename Enum, std::size_t N>
std::vector<std::string> NamesIn(const Row<Enum> (&table)[N], bool with_aliases) {
  std::vector<std::string> names;
  for (const Row<Enum>& row : table) {
    if (!row.askable) continue;
    names.emplace_back(row.name);
  }
  for (const Row<Enum>& row : table) {
    if (!row.askable || !with_aliases) continue;
    for (std::string_view alias : row.aliases) {
      if (!alias.empty()) names.emplace_back(alias);
    }
  }
  return names;
}

}  // namespace

std::string DTypeShortName(v1::DType dtype) { return NameIn(kDTypes, dtype); }
std::string ModeShortName(v1::Mode mode) { return NameIn(kModes, mode); }
std::string TimerShortName(v1::Timer timer) { return NameIn(kTimers, timer); }
std::string CacheShortName(v1::CacheMode cache) { return NameIn(kCaches, cache); }
std::string ResultStatusShortName(v1::ResultStatus status) { return NameIn(kStatuses, status); }
std::string PeakSourceShortName(v1::PeakSource source) { return NameIn(kPeakSources, source); }

namespace {

// The generic rule: the enum's prefix is its values' common leading words ("VERDICT_" of
// VERDICT_SAME, VERDICT_SLOWER, ...), so a one-word value keeps its word.
std::string DerivedShortName(const google::protobuf::EnumDescriptor& type, int number) {
  const google::protobuf::EnumValueDescriptor* value = type.FindValueByNumber(number);
  if (value == nullptr) value = type.FindValueByNumber(0);
  if (value == nullptr) return "unspecified";
  std::string prefix = type.value(0)->name();
  for (int i = 1; i < type.value_count(); ++i) {
    const std::string& other = type.value(i)->name();
    std::size_t n = 0;
    while (n < prefix.size() && n < other.size() && prefix[n] == other[n]) ++n;
    prefix.resize(n);
  }
  prefix.resize(prefix.rfind('_') == std::string::npos ? 0 : prefix.rfind('_') + 1);
  std::string name(value->name());
  if (absl::StartsWith(name, prefix) && name.size() > prefix.size()) name.erase(0, prefix.size());
  return absl::AsciiStrToLower(name);
}

}  // namespace

std::string EnumShortName(const google::protobuf::EnumDescriptor& type, int number) {
  if (&type == v1::DType_descriptor()) return DTypeShortName(static_cast<v1::DType>(number));
  if (&type == v1::Mode_descriptor()) return ModeShortName(static_cast<v1::Mode>(number));
  if (&type == v1::Timer_descriptor()) return TimerShortName(static_cast<v1::Timer>(number));
  if (&type == v1::CacheMode_descriptor()) {
    return CacheShortName(static_cast<v1::CacheMode>(number));
  }
  if (&type == v1::ResultStatus_descriptor()) {
    return ResultStatusShortName(static_cast<v1::ResultStatus>(number));
  }
  if (&type == v1::PeakSource_descriptor()) {
    return PeakSourceShortName(static_cast<v1::PeakSource>(number));
  }
  return DerivedShortName(type, number);
}

std::optional<v1::DType> ParseDTypeName(std::string_view name) { return ParseIn(kDTypes, name); }
std::optional<v1::Mode> ParseModeName(std::string_view name) { return ParseIn(kModes, name); }
std::optional<v1::Timer> ParseTimerName(std::string_view name) { return ParseIn(kTimers, name); }
std::optional<v1::CacheMode> ParseCacheName(std::string_view name) {
  return ParseIn(kCaches, name);
}
std::optional<v1::ResultStatus> ParseResultStatusName(std::string_view name) {
  return ParseIn(kStatuses, name);
}
std::optional<v1::PeakSource> ParsePeakSourceName(std::string_view name) {
  return ParseIn(kPeakSources, name);
}

std::vector<std::string> DTypeNames() { return NamesIn(kDTypes, false); }
std::vector<std::string> ModeNames() { return NamesIn(kModes, false); }
std::vector<std::string> TimerNames() { return NamesIn(kTimers, false); }
std::vector<std::string> CacheNames() { return NamesIn(kCaches, false); }
std::vector<std::string> DTypeSpellings() { return NamesIn(kDTypes, true); }
std::vector<std::string> ModeSpellings() { return NamesIn(kModes, true); }
std::vector<std::string> TimerSpellings() { return NamesIn(kTimers, true); }

}  // namespace kerneleval
