// The JSON the CLI prints for programs (every --json and --format json/jsonl output):
// protobuf's JSON mapping with the proto field names and every field printed, then made
// easy to filter with jq or load with pandas:
// - 64-bit integers (int64, uint64 and their fixed/signed kinds, map values included) are
//   JSON numbers, printed exactly, not the strings protobuf's mapping uses;
// - enum values are the contract's short names of common/enum_names.h ("host_clock",
//   "bf16", "slower"), not "TIMER_HOST_CLOCK";
// - doubles that are not finite (protobuf's "NaN", "Infinity") are null, so that a numeric
//   comparison never meets a string.
// The walk is driven by the message's descriptor, so a field added to the contract gets
// the same treatment without a change here. The output no longer parses back with
// JsonStringToMessage (enum names differ); it is a format for readers, not a wire.
// Pure functions; thread-safe.
#pragma once

#include <string>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace kerneleval::client {

absl::StatusOr<nlohmann::ordered_json> ContractJson(const google::protobuf::Message& message);

}  // namespace kerneleval::client
