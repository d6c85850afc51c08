// The names people read and type for the wire contract's enums (kerneleval.v1): one table
// per enum, each value with one printed name and the other spellings accepted as aliases.
// Every format (table, JSON, CSV, HTML, history, OIP parameters, measured_as) prints the
// name from here; every flag and parameter parses through here.
//
// The printed name is the contract's enum name without its prefix, in lower case ("bf16",
// "output_and_residual", "cuda_events", "rejected"); the Python client derives the same
// names from the enum descriptors. Unspecified values print as what the contract says they
// mean where it says so: MODE_UNSPECIFIED "output", CACHE_MODE_UNSPECIFIED "cold",
// TIMER_UNSPECIFIED "auto" (the best timer the device has); otherwise "unspecified".
//
// Pure functions over constant tables; safe to call from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval {

std::string DTypeShortName(v1::DType dtype);
std::string ModeShortName(v1::Mode mode);
std::string TimerShortName(v1::Timer timer);
std::string CacheShortName(v1::CacheMode cache);
std::string ResultStatusShortName(v1::ResultStatus status);
// A SOL figure's peak: "device_attributes", "datasheet", "measured_copy".
std::string PeakSourceShortName(v1::PeakSource source);

// The printed name of value `number` of any enum of the contract, for formats that walk
// messages by descriptor (the CLI's JSON): the tables above for the enums they cover, and for
// the others (Verdict, ExportFormat, SourceLanguage, and any enum added later) the same rule
// read from the descriptor, the value's name without the enum's prefix in lower case
// ("VERDICT_SLOWER" -> "slower"). A number the descriptor does not know prints as the
// enum's zero value would.
std::string EnumShortName(const google::protobuf::EnumDescriptor& type, int number);

// The printed names and the aliases: dtypes also as suite files and frameworks spell them
// ("bfloat16", "float16", "half", "float32", "float"); timers as the CLI spelled them
// ("events", "host") and "auto" for TIMER_UNSPECIFIED. nullopt for anything else.
std::optional<v1::DType> ParseDTypeName(std::string_view name);
std::optional<v1::Mode> ParseModeName(std::string_view name);
std::optional<v1::Timer> ParseTimerName(std::string_view name);
std::optional<v1::CacheMode> ParseCacheName(std::string_view name);
std::optional<v1::ResultStatus> ParseResultStatusName(std::string_view name);
std::optional<v1::PeakSource> ParsePeakSourceName(std::string_view name);

// The printed names of the values a caller may ask for (no unspecified value but the
// timer's "auto"), for flag choices and error messages: {"bf16", "fp16", "fp32"}.
std::vector<std::string> DTypeNames();
std::vector<std::string> ModeNames();
std::vector<std::string> TimerNames();
std::vector<std::string> CacheNames();
// Every spelling the parser accepts, names and aliases, for flag checks.
std::vector<std::string> DTypeSpellings();
std::vector<std::string> ModeSpellings();
std::vector<std::string> TimerSpellings();

}  // namespace kerneleval
