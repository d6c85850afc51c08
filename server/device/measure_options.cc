#include "server/device/measure_options.h"

namespace kerneleval::server {

MeasureOptions ToMeasureOptions(const v1::Protocol& protocol) {
  MeasureOptions o;
  o.warmup = protocol.warmup();
  o.repetitions = protocol.repetitions();
  if (protocol.has_adaptive()) {
    o.adaptive.enabled = true;
    o.adaptive.min_samples = protocol.adaptive().min_samples();
    o.adaptive.max_samples = protocol.adaptive().max_samples();
    o.adaptive.target_relative_spread = protocol.adaptive().target_relative_spread();
    o.adaptive.max_seconds = protocol.adaptive().max_seconds();
  }
  o.cold = protocol.cache() != v1::CACHE_MODE_HOT;
  o.graph = protocol.cuda_graph();
  o.graph_calls = protocol.graph_calls();
  o.rotate_inputs = protocol.rotate_inputs();
  o.timer = protocol.timer();
  o.measure_dram_bytes = protocol.measure_dram_bytes();
  o.profile = protocol.profile();
  o.check_calls = protocol.check_every_call();
  return o;
}

v1::Protocol ToProtocol(const MeasureOptions& o) {
  v1::Protocol p;
  p.set_warmup(o.warmup);
  p.set_repetitions(o.repetitions);
  if (o.adaptive.enabled) {
    v1::AdaptiveStop* a = p.mutable_adaptive();
    a->set_min_samples(o.adaptive.min_samples);
    a->set_max_samples(o.adaptive.max_samples);
    a->set_target_relative_spread(o.adaptive.target_relative_spread);
    a->set_max_seconds(o.adaptive.max_seconds);
  }
  p.set_cache(o.cold ? v1::CACHE_MODE_COLD : v1::CACHE_MODE_HOT);
  p.set_cuda_graph(o.graph);
  p.set_graph_calls(o.graph_calls);
  p.set_rotate_inputs(o.rotate_inputs);
  p.set_timer(o.timer);
  p.set_measure_dram_bytes(o.measure_dram_bytes);
  p.set_profile(o.profile);
  p.set_check_every_call(o.check_calls);
  return p;
}

}  // namespace kerneleval::server
