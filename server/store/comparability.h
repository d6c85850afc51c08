// What a stored result measured, and whether two results measured the same thing: a verdict
// between a bf16 h2048 result and an fp32 h1024 one that share a workload name, or between a
// cold CUPTI result and a hot graph replay, or between an H100 and an H200, says nothing about
// the code. Also how a receipt's workload is found in its definition (Reproduce), since the
// built-in suites leave workload names to be generated.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "kerneleval/v1/results.pb.h"

namespace kerneleval::server::store {

// The problem (dtype, mode, eps, batch, hidden), the protocol (cache mode, graph replay,
// input rotation, timer) and the device model of a stored result.
struct MeasuredSetup {
  std::string dtype, mode;
  double eps = 0;
  std::int64_t batch = 0, hidden = 0;  // 0: not resolvable from the stored definition
  std::string cache, timer;
  bool cuda_graph = false;
  bool rotate_inputs = false;
  std::string device_model;
};

MeasuredSetup SetupOf(const v1::StoredResult& result);

// What differs, "dtype bf16 vs fp32, hidden 2048 vs 1024", baseline first; empty when the
// two measured the same problem the same way on the same device model.
std::string SetupDifferences(const MeasuredSetup& baseline, const MeasuredSetup& candidate);

// What makes two runs' protocols the same measurement, as bytes to compare: the protocol as
// resolved without the fields that bound or add to a run but do not change how a sample is
// taken (max_total_seconds, measure_copy_bandwidth).
std::string ProtocolIdentity(const v1::Protocol& protocol);

// The workload of `definition` that `result` ran: the one whose name (declared, or generated
// as WorkloadName does: "batch_size=79") is the result's, else the one with exactly the
// result's var axes. Null when none is.
const v1::Workload* FindWorkload(const v1::SuiteDefinition& definition,
                                 const v1::WorkloadResult& result);

}  // namespace kerneleval::server::store
