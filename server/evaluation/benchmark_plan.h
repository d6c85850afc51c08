// What a Benchmark runs once its request is validated (server/core/request_validation.h builds
// it): the suite, its workloads resolved to problems, seeds and tolerances, and the protocol.
// The benchmark engine (benchmark_engine.h) takes it as it is and validates nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kerneleval/v1/kerneleval.pb.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// One workload of a suite, resolved once: its problem, input seed and tolerance.
struct PlannedWorkload {
  int index = 0;  // in the suite, for input seeds
  std::string name;
  v1::Workload workload;  // as defined (axes, for results)
  Problem problem;
  std::uint64_t seed = 0;   // the base seed of its inputs (the workload's, else the protocol's)
  v1::Tolerance tolerance;  // resolved
};

// When a Benchmark prepares each workload's inputs and fp64 reference on the host
// (server/evaluation/workload_preparation.h): kAuto lets the device's kind decide (ahead on a GPU,
// serially on the CPU, whose measurements a busy host would disturb). kSerial and kAhead force one
// way: a test and diagnostic switch (ahead on the CPU backend is how a CPU-only CI runs the
// prepared-ahead path for real), never a tuning knob.
enum class HostPreparation { kAuto, kSerial, kAhead };

// What a Benchmark request asks for once validated: the suite (named, or the custom one
// checked by the suite rules), its workloads resolved, the protocol with defaults filled in.
// Devices and implementations are chosen per device by the caller.
struct BenchmarkPlan {
  v1::SuiteDefinition suite;
  bool named_suite = false;  // a suite loaded at start (its results are exported as metrics)
  std::vector<PlannedWorkload> workloads;
  v1::Protocol protocol;
  std::vector<std::string> implementations;  // filled per device, as the request names them
  // Those that name a registered submission: the backend name (its id) and what to load.
  std::map<std::string, std::pair<std::string, SubmittedKernel>> submissions;
  HostPreparation host_preparation = HostPreparation::kAuto;  // the server's, not the request's
};

}  // namespace kerneleval::server
