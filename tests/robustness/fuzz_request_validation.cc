// libFuzzer target: arbitrary bytes parsed as a RunRequest and as a BenchmarkRequest, then
// put through the server's validation exactly as the RPC edge does (ValidateRunRequest;
// ValidateSuite, ResolveShape and WorkloadName on the custom suite; ResolveProtocol), and the
// same bytes read as suite JSON. Nothing may crash, hang or trip a sanitizer, and whatever
// validation accepts must keep the invariants the backends rely on.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/suites.h"
#include "google/protobuf/stubs/logging.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/core/request_validation.h"

namespace {

using kerneleval::server::RequestLimits;

void Require(bool condition) {
  if (!condition) std::abort();
}

void CheckRun(const std::uint8_t* data, std::size_t size, const RequestLimits& limits) {
  kerneleval::v1::RunRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  const auto problem = kerneleval::server::ValidateRunRequest(request, limits);
  if (!problem.ok()) return;
  // What the backends assume of an accepted request.
  Require(problem->batch > 0 && problem->batch <= limits.max_batch);
  Require(problem->hidden > 0 && problem->hidden <= limits.max_hidden);
  Require(std::isfinite(problem->eps));
  const std::uint64_t bytes = static_cast<std::uint64_t>(problem->batch) *
                              static_cast<std::uint64_t>(problem->hidden) *
                              kerneleval::ElementSize(problem->dtype);
  Require(bytes <= limits.max_tensor_bytes);
  Require(request.hidden_states().data().size() == bytes);
  Require(request.residual().data().size() == bytes);
  Require(request.weight().data().size() ==
          static_cast<std::uint64_t>(problem->hidden) * kerneleval::ElementSize(problem->dtype));
}

void CheckBenchmark(const std::uint8_t* data, std::size_t size, const RequestLimits& limits) {
  kerneleval::v1::BenchmarkRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  const auto protocol = kerneleval::server::ResolveProtocol(request.protocol(), limits);
  if (protocol.ok()) {
    Require(protocol->repetitions() <= limits.max_repetitions);
    Require(protocol->warmup() <= limits.max_warmup);
    Require(protocol->graph_calls() >= 1 && protocol->graph_calls() <= limits.max_graph_calls);
    Require(protocol->max_total_seconds() > 0);
    (void)kerneleval::server::ToMeasureOptions(*protocol);
  }
  const kerneleval::v1::SuiteDefinition& suite = request.custom_suite();
  const bool valid = kerneleval::ValidateSuite(suite, "custom_suite").ok();
  for (const kerneleval::v1::Workload& w : suite.workloads()) {
    const auto shape = kerneleval::ResolveShape(suite, w);
    // ValidateSuite promises that every workload of a valid suite resolves.
    if (valid) Require(shape.ok());
    if (shape.ok()) {
      Require(shape->batch >= 1 && shape->batch <= kerneleval::kMaxAxisValue);
      Require(shape->hidden >= 1 && shape->hidden <= kerneleval::kMaxAxisValue);
    }
    (void)kerneleval::WorkloadName(suite, w);
  }
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it parses; that is expected here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Smaller limits than the defaults make the limit checks reachable.
  static const RequestLimits kLimits[] = {RequestLimits(), [] {
                                            RequestLimits l;
                                            l.max_tensor_bytes = 4096;
                                            l.max_batch = 64;
                                            l.max_hidden = 512;
                                            l.max_repetitions = 100;
                                            return l;
                                          }()};
  for (const RequestLimits& limits : kLimits) {
    CheckRun(data, size, limits);
    CheckBenchmark(data, size, limits);
  }
  const auto suite = kerneleval::ParseSuiteJson(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (suite.ok()) Require(kerneleval::ValidateSuite(*suite).ok());
  return 0;
}
