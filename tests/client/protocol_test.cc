// The protocol's one table (common/protocol.h) against the contract's documented defaults
// (proto/kerneleval/v1/kerneleval.proto, message Protocol) and the label set the store and
// the metrics promise.
#include "common/protocol.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace kerneleval {
namespace {

TEST(Protocol, AnEmptyRequestGetsTheContractsDefaults) {
  const v1::Protocol p = WithProtocolDefaults(v1::Protocol());
  EXPECT_EQ(p.warmup(), 10u);
  EXPECT_EQ(p.repetitions(), 50u);
  EXPECT_EQ(p.seed(), 200u);
  EXPECT_EQ(p.graph_calls(), 20u);
  EXPECT_EQ(p.cache(), v1::CACHE_MODE_COLD);
  EXPECT_FALSE(p.has_adaptive());
  EXPECT_EQ(p.max_total_seconds(), 0);  // The server's limit, not a protocol default.
  EXPECT_EQ(ProtocolLabel(p), "cold");
  EXPECT_EQ(ProtocolText(p), "cold cache, warm-up 10, 50 repetitions, timer auto, seed 200");
}

TEST(Protocol, WhatTheRequestSetStaysEvenZero) {
  v1::Protocol requested;
  requested.set_warmup(0);  // Explicit: no warm-up.
  requested.set_repetitions(7);
  requested.set_seed(0);
  requested.set_cache(v1::CACHE_MODE_HOT);
  requested.set_graph_calls(5);
  const v1::Protocol p = WithProtocolDefaults(requested);
  EXPECT_EQ(p.warmup(), 0u);
  EXPECT_EQ(p.repetitions(), 7u);
  EXPECT_EQ(p.seed(), 0u);
  EXPECT_EQ(p.cache(), v1::CACHE_MODE_HOT);
  EXPECT_EQ(p.graph_calls(), 5u);
  EXPECT_EQ(ProtocolLabel(p), "hot_custom");
}

TEST(Protocol, AdaptiveStoppingFillsOnlyItsUnsetFields) {
  v1::Protocol requested;
  requested.mutable_adaptive()->set_max_samples(200);
  requested.mutable_adaptive()->set_target_relative_spread(-1);  // Left for the validator.
  const v1::Protocol p = WithProtocolDefaults(requested);
  EXPECT_EQ(p.adaptive().min_samples(), 10u);
  EXPECT_EQ(p.adaptive().max_samples(), 200u);
  EXPECT_EQ(p.adaptive().target_relative_spread(), -1);
  EXPECT_EQ(p.adaptive().max_seconds(), 5);
  v1::Protocol only_adaptive;
  only_adaptive.mutable_adaptive();
  EXPECT_EQ(WithProtocolDefaults(only_adaptive).adaptive().target_relative_spread(), 0.005);
  EXPECT_EQ(ProtocolLabel(p), "cold_custom");
}

TEST(Protocol, LabelsAreTheSixteenTheFilterAccepts) {
  std::set<std::string> labels;
  for (v1::CacheMode cache : {v1::CACHE_MODE_COLD, v1::CACHE_MODE_HOT}) {
    for (bool graph : {false, true}) {
      for (bool rotate : {false, true}) {
        for (bool custom : {false, true}) {
          v1::Protocol p;
          p.set_cache(cache);
          p.set_cuda_graph(graph);
          p.set_rotate_inputs(rotate);
          if (custom) p.set_repetitions(3);
          const std::string label = ProtocolLabel(WithProtocolDefaults(p));
          EXPECT_TRUE(IsProtocolLabel(label)) << label;
          labels.insert(label);
        }
      }
    }
  }
  EXPECT_EQ(labels.size(), 16u);
  EXPECT_TRUE(labels.count("hot_graph_rotate_custom"));
  for (const char* bad : {"", "warm", "cold_", "cold_rotate_graph", "hot_custom_custom", "COLD"}) {
    EXPECT_FALSE(IsProtocolLabel(bad)) << bad;
  }
}

TEST(Protocol, ShortAndLongTextReadAnUnsetGraphSizeAsItsDefault) {
  v1::Protocol p;
  p.set_cache(v1::CACHE_MODE_HOT);
  p.set_cuda_graph(true);
  p.set_rotate_inputs(true);
  p.set_timer(v1::TIMER_CUPTI);
  p.set_warmup(3);
  p.set_repetitions(9);
  p.set_seed(1);
  EXPECT_EQ(ProtocolShortText(p), "hot, graph x20, rotate");
  EXPECT_EQ(MeasuredAsName(v1::TIMER_CUPTI, v1::CACHE_MODE_COLD, false, 1, false), "cupti, cold");
  EXPECT_EQ(ProtocolText(p),
            "hot cache, CUDA graph of 20 calls, rotating inputs, warm-up 3, 9 repetitions, timer "
            "cupti, seed 1");
  p.mutable_adaptive()->set_min_samples(5);
  p.mutable_adaptive()->set_max_samples(100);
  p.mutable_adaptive()->set_target_relative_spread(0.01);
  p.mutable_adaptive()->set_max_seconds(2.5);
  EXPECT_NE(ProtocolText(p).find("adaptive 5..100 samples to 1.00% spread, cap 2.5 s"),
            std::string::npos)
      << ProtocolText(p);
}

}  // namespace
}  // namespace kerneleval
