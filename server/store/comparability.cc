#include "server/store/comparability.h"

#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/conversions.h"
#include "common/suites.h"

namespace kerneleval::server::store {

std::string ProtocolIdentity(const v1::Protocol& protocol) {
  v1::Protocol p = protocol;
  p.clear_max_total_seconds();
  p.clear_measure_copy_bandwidth();
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  p.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

const v1::Workload* FindWorkload(const v1::SuiteDefinition& definition,
                                 const v1::WorkloadResult& result) {
  for (const v1::Workload& w : definition.workloads()) {
    if (WorkloadName(definition, w) == result.workload()) return &w;
  }
  // A result stored before its suite's workloads were renamed still names its axes: every
  // var axis of the workload, and const axes (if the result lists them) of the same value.
  auto axis_value = [&](const v1::Workload& w, const std::string& name) -> std::int64_t {
    if (const auto it = w.axes().find(name); it != w.axes().end()) return it->second;
    for (const v1::Axis& a : definition.axes()) {
      if (a.name() == name && a.is_const()) return a.value();
    }
    return -1;
  };
  for (const v1::Workload& w : definition.workloads()) {
    bool same = true;
    for (const auto& [axis, value] : w.axes()) {
      const auto it = result.axes().find(axis);
      if (it == result.axes().end() || it->second != value) same = false;
    }
    for (const auto& [axis, value] : result.axes()) {
      if (axis_value(w, axis) != value) same = false;
    }
    if (same) return &w;
  }
  return nullptr;
}

MeasuredSetup SetupOf(const v1::StoredResult& stored) {
  const v1::SuiteDefinition& definition = stored.receipt().definition();
  const v1::Protocol& protocol = stored.receipt().protocol();
  MeasuredSetup s;
  s.dtype = DTypeShortName(definition.dtype());
  s.mode = ModeShortName(definition.mode() == v1::MODE_UNSPECIFIED ? v1::MODE_OUTPUT
                                                                   : definition.mode());
  s.eps = definition.eps() == 0 ? kDefaultEps : definition.eps();
  if (const v1::Workload* w = FindWorkload(definition, stored.result()); w != nullptr) {
    if (auto shape = ResolveShape(definition, *w); shape.ok()) {
      s.batch = shape->batch;
      s.hidden = shape->hidden;
    }
  }
  s.cache = CacheShortName(protocol.cache());
  s.cuda_graph = protocol.cuda_graph();
  s.rotate_inputs = protocol.rotate_inputs();
  // The timer that took the samples, not the one asked for (unspecified = the best there).
  s.timer = TimerShortName(stored.result().timer());
  s.device_model = stored.environment().device().model();
  return s;
}

std::string SetupDifferences(const MeasuredSetup& b, const MeasuredSetup& c) {
  std::vector<std::string> d;
  auto differ = [&d](const char* what, const auto& x, const auto& y) {
    if (x != y) d.push_back(absl::StrCat(what, " ", x, " vs ", y));
  };
  auto yes_no = [](bool v) { return v ? "yes" : "no"; };
  differ("dtype", b.dtype, c.dtype);
  differ("mode", b.mode, c.mode);
  differ("eps", b.eps, c.eps);
  // 0 (not resolvable) differs from anything: a problem nobody can name is not comparable.
  differ("batch", b.batch, c.batch);
  differ("hidden", b.hidden, c.hidden);
  differ("cache", b.cache, c.cache);
  differ("cuda graph", yes_no(b.cuda_graph), yes_no(c.cuda_graph));
  differ("rotated inputs", yes_no(b.rotate_inputs), yes_no(c.rotate_inputs));
  differ("timer", b.timer, c.timer);
  differ("device model", b.device_model.empty() ? "unknown" : b.device_model,
         c.device_model.empty() ? "unknown" : c.device_model);
  return absl::StrJoin(d, ", ");
}

}  // namespace kerneleval::server::store
