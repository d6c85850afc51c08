// The measurement protocol's one home: the defaults of every field a request may leave unset,
// and every name the project gives a protocol. The server resolves requests with these
// defaults (server/core/request_validation.cc), a backend's MeasureOptions start from them
// (server/device/backend.h), the metrics and the store label series by ProtocolLabel, and the
// client describes reports with ProtocolText. A new protocol field is added here, in the
// contract, and in the files docs/architecture.md lists for "a protocol".
//
// Pure functions over constants; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval {

// The defaults documented in proto/kerneleval/v1/kerneleval.proto (message Protocol), which
// are also the protocol of the scheduled benchmark (`kerneleval bench` without protocol flags).
struct ProtocolDefaults {
  static constexpr std::uint32_t kWarmup = 10;
  static constexpr std::uint32_t kRepetitions = 50;
  static constexpr std::uint64_t kSeed = 200;  // As SOL-ExecBench.
  static constexpr std::uint32_t kGraphCalls = 20;
  static constexpr v1::CacheMode kCache = v1::CACHE_MODE_COLD;
  static constexpr std::uint32_t kAdaptiveMinSamples = 10;
  static constexpr std::uint32_t kAdaptiveMaxSamples = 1000;
  static constexpr double kAdaptiveTargetSpread = 0.005;
  static constexpr double kAdaptiveMaxSeconds = 5;
};

// `p` with every field the request left unset (or zero where zero means "default") filled
// from ProtocolDefaults. Checks nothing: values out of range stay for the validator to name.
// max_total_seconds is the server's limit, not a protocol default, and is left as it is.
v1::Protocol WithProtocolDefaults(v1::Protocol p);

// A bounded label for a resolved protocol: cache mode ("cold" / "hot"), then "_graph" for
// CUDA-graph replay, "_rotate" for rotated inputs, and "_custom" when warm-up, repetitions,
// adaptive stopping or seed differ from the defaults. An ad-hoc 3-repetition run therefore
// never overwrites the scheduled series, and the label takes at most 16 values.
std::string ProtocolLabel(const v1::Protocol& protocol);
// Whether `label` is one ProtocolLabel can return ("cold", "hot_graph_rotate_custom", ...).
bool IsProtocolLabel(std::string_view label);

// How a number was measured, as results' measured_as and every format print it: the timer,
// the cache mode, then ", graph x<calls>" and ", rotate" when they apply ("cupti, cold",
// "cuda_events, hot, graph x50, rotate"). Without a timer, the protocol alone ("cold, rotate").
std::string ProtocolShortText(v1::CacheMode cache, bool graph, unsigned graph_calls, bool rotate);
// The same for a protocol (an unset graph_calls reads as its default).
std::string ProtocolShortText(const v1::Protocol& protocol);
std::string MeasuredAsName(v1::Timer timer, v1::CacheMode cache, bool graph, unsigned graph_calls,
                           bool rotate);

// The protocol in one sentence for a report's heading: "cold cache, CUDA graph of 20 calls,
// warm-up 10, 50 repetitions, timer cupti, seed 200" (adaptive stopping, rotation and the copy
// bandwidth where set). An unset graph_calls reads as its default.
std::string ProtocolText(const v1::Protocol& protocol);

}  // namespace kerneleval
