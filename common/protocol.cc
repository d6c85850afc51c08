#include "common/protocol.h"

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/enum_names.h"

namespace kerneleval {
namespace {

unsigned GraphCallsOrDefault(const v1::Protocol& p) {
  return p.graph_calls() != 0 ? p.graph_calls() : ProtocolDefaults::kGraphCalls;
}

std::string Printf(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

}  // namespace

v1::Protocol WithProtocolDefaults(v1::Protocol p) {
  using D = ProtocolDefaults;
  if (!p.has_warmup()) p.set_warmup(D::kWarmup);
  if (!p.has_repetitions()) p.set_repetitions(D::kRepetitions);
  if (!p.has_seed()) p.set_seed(D::kSeed);
  if (p.cache() == v1::CACHE_MODE_UNSPECIFIED) p.set_cache(D::kCache);
  if (p.graph_calls() == 0) p.set_graph_calls(D::kGraphCalls);
  if (p.has_adaptive()) {
    v1::AdaptiveStop* a = p.mutable_adaptive();
    if (a->min_samples() == 0) a->set_min_samples(D::kAdaptiveMinSamples);
    if (a->max_samples() == 0) a->set_max_samples(D::kAdaptiveMaxSamples);
    if (a->target_relative_spread() == 0) a->set_target_relative_spread(D::kAdaptiveTargetSpread);
    if (a->max_seconds() == 0) a->set_max_seconds(D::kAdaptiveMaxSeconds);
  }
  return p;
}

std::string ProtocolLabel(const v1::Protocol& p) {
  std::string label = p.cache() == v1::CACHE_MODE_HOT ? "hot" : "cold";
  if (p.cuda_graph()) label += "_graph";
  if (p.rotate_inputs()) label += "_rotate";
  const bool custom = p.warmup() != ProtocolDefaults::kWarmup ||
                      p.repetitions() != ProtocolDefaults::kRepetitions || p.has_adaptive() ||
                      p.seed() != ProtocolDefaults::kSeed;
  if (custom) label += "_custom";
  return label;
}

bool IsProtocolLabel(std::string_view label) {
  absl::string_view text(label.data(), label.size());
  if (!absl::ConsumePrefix(&text, "hot")) {
    if (!absl::ConsumePrefix(&text, "cold")) return false;
  }
  absl::ConsumePrefix(&text, "_graph");
  absl::ConsumePrefix(&text, "_rotate");
  absl::ConsumePrefix(&text, "_custom");
  return text.empty();
}

std::string ProtocolShortText(v1::CacheMode cache, bool graph, unsigned graph_calls, bool rotate) {
  std::string text = CacheShortName(cache);
  if (graph) text += ", graph x" + std::to_string(graph_calls);
  if (rotate) text += ", rotate";
  return text;
}

std::string ProtocolShortText(const v1::Protocol& protocol) {
  return ProtocolShortText(protocol.cache(), protocol.cuda_graph(), GraphCallsOrDefault(protocol),
                           protocol.rotate_inputs());
}

std::string MeasuredAsName(v1::Timer timer, v1::CacheMode cache, bool graph, unsigned graph_calls,
                           bool rotate) {
  return TimerShortName(timer) + ", " + ProtocolShortText(cache, graph, graph_calls, rotate);
}

std::string ProtocolText(const v1::Protocol& protocol) {
  std::vector<std::string> parts;
  parts.push_back(absl::StrCat(CacheShortName(protocol.cache()), " cache"));
  if (protocol.cuda_graph()) {
    parts.push_back(absl::StrCat("CUDA graph of ", GraphCallsOrDefault(protocol), " calls"));
  }
  if (protocol.rotate_inputs()) parts.push_back("rotating inputs");
  parts.push_back(absl::StrCat("warm-up ", protocol.warmup()));
  if (protocol.has_adaptive()) {
    const v1::AdaptiveStop& a = protocol.adaptive();
    parts.push_back(absl::StrCat("adaptive ", a.min_samples(), "..", a.max_samples(),
                                 " samples to ", Printf("%.2f", 100 * a.target_relative_spread()),
                                 "% spread, cap ", Printf("%.6g", a.max_seconds()), " s"));
  } else {
    parts.push_back(absl::StrCat(protocol.repetitions(), " repetitions"));
  }
  parts.push_back(absl::StrCat("timer ", TimerShortName(protocol.timer())));
  parts.push_back(absl::StrCat("seed ", protocol.seed()));
  if (protocol.measure_copy_bandwidth()) parts.push_back("copy bandwidth measured");
  return absl::StrJoin(parts, ", ");
}

}  // namespace kerneleval
