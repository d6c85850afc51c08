#include "server/rpc/results_service.h"

#include <chrono>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/bounded_text.h"
#include "common/protocol.h"
#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "server/core/benchmark_call.h"
#include "server/core/caller_of.h"
#include "server/grpc/raw_unary.h"
#include "server/grpc/status.h"
#include "server/store/comparability.h"
#include "server/store/compare_results.h"

namespace kerneleval::server {

using store::CompareResults;
using store::FindWorkload;
namespace {

// Longer than any suite, workload or implementation name the server accepts.
constexpr std::size_t kMaxName = 256;

grpc::Status Invalid(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

grpc::Status CheckName(const std::string& field, const std::string& value) {
  if (value.size() > kMaxName) {
    return Invalid(absl::StrCat(field, ": longer than ", kMaxName, " bytes: ", Quote(value)));
  }
  return grpc::Status::OK;
}

grpc::Status CheckWindow(const std::string& field, std::int64_t since, std::int64_t until) {
  if (since < 0 || until < 0) return Invalid(absl::StrCat(field, ": negative time"));
  if (since != 0 && until != 0 && until <= since) {
    return Invalid(absl::StrCat(field, ".until_unix_seconds: ", until,
                                " is not after since_unix_seconds ", since));
  }
  return grpc::Status::OK;
}

grpc::Status CheckFilter(const v1::ResultFilter& f) {
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"filter.suite", &f.suite()},
        {"filter.workload", &f.workload()},
        {"filter.implementation", &f.implementation()},
        {"filter.device_model", &f.device_model()},
        {"filter.run_id", &f.run_id()}}) {
    if (grpc::Status s = CheckName(field, *value); !s.ok()) return s;
  }
  if (!f.protocol().empty() && !IsProtocolLabel(f.protocol())) {
    return Invalid(absl::StrCat(
        "filter.protocol: ", Quote(f.protocol()),
        " is not a protocol label: hot or cold, then _graph, _rotate, _custom as measured "
        "(\"cold\", \"hot_graph\", \"cold_rotate_custom\")"));
  }
  return CheckWindow("filter", f.since_unix_seconds(), f.until_unix_seconds());
}

grpc::Status CheckAlpha(double alpha) {
  if (!(alpha >= 0 && alpha < 1)) {
    return Invalid(absl::StrCat("alpha: ", alpha, " is not in [0, 1) (0 = 0.05)"));
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ResultsService::DoHistory(grpc::CallbackServerContext* context,
                                       const v1::HistoryRequest* request,
                                       v1::HistoryResponse* response) {
  if (grpc::Status s = CheckFilter(request->filter()); !s.ok()) return s;
  if (request->page_size() > 1000) {
    return Invalid(absl::StrCat("page_size: ", request->page_size(), " is above 1000"));
  }
  if (grpc::Status s = CheckName("page_token", request->page_token()); !s.ok()) return s;
  auto got = state_->results->History(*request, OwnerOfCall(state_->identities, *context));
  if (!got.ok()) return ToGrpcStatus(got.status());
  *response = std::move(*got);
  return grpc::Status::OK;
}

grpc::Status ResultsService::DoLeaderboard(grpc::CallbackServerContext* context,
                                           const v1::LeaderboardRequest* request,
                                           v1::LeaderboardResponse* response) {
  if (request->suite().empty()) return Invalid("suite: required");
  if (grpc::Status s = CheckName("suite", request->suite()); !s.ok()) return s;
  if (grpc::Status s = CheckName("device_model", request->device_model()); !s.ok()) return s;
  auto got = state_->results->Leaderboard(*request, OwnerOfCall(state_->identities, *context));
  if (!got.ok()) return ToGrpcStatus(got.status());
  *response = std::move(*got);
  return grpc::Status::OK;
}

grpc::Status ResultsService::DoCompare(grpc::CallbackServerContext* context,
                                       const v1::CompareRequest* request,
                                       v1::CompareResponse* response) {
  const bool by_run = !request->baseline_run().empty() || !request->candidate_run().empty();
  if (request->baseline_previous()) {
    if (request->candidate_run().empty())
      return Invalid("candidate_run: required with baseline_previous");
    if (!request->baseline_run().empty())
      return Invalid("baseline_run: give it or baseline_previous, not both");
    if (!request->implementation().empty() || !request->suite().empty()) {
      return Invalid("implementation: not with baseline_previous");
    }
  } else if (by_run) {
    if (request->baseline_run().empty())
      return Invalid("baseline_run: required with candidate_run");
    if (request->candidate_run().empty())
      return Invalid("candidate_run: required with baseline_run");
    if (!request->implementation().empty() || !request->suite().empty()) {
      return Invalid("implementation: give two runs or an implementation and windows, not both");
    }
  } else {
    if (request->implementation().empty()) {
      return Invalid("baseline_run: give two runs, or implementation, suite and two windows");
    }
    if (request->suite().empty()) return Invalid("suite: required with implementation");
    if (grpc::Status s =
            CheckWindow("baseline_window", request->baseline_window().since_unix_seconds(),
                        request->baseline_window().until_unix_seconds());
        !s.ok()) {
      return s;
    }
    if (grpc::Status s =
            CheckWindow("candidate_window", request->candidate_window().since_unix_seconds(),
                        request->candidate_window().until_unix_seconds());
        !s.ok()) {
      return s;
    }
  }
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"baseline_run", &request->baseline_run()},
        {"candidate_run", &request->candidate_run()},
        {"implementation", &request->implementation()},
        {"suite", &request->suite()},
        {"device_model", &request->device_model()}}) {
    if (grpc::Status s = CheckName(field, *value); !s.ok()) return s;
  }
  if (grpc::Status s = CheckAlpha(request->alpha()); !s.ok()) return s;
  if (!(request->min_relative_difference() >= 0 && request->min_relative_difference() < 1)) {
    return Invalid(absl::StrCat("min_relative_difference: ", request->min_relative_difference(),
                                " is not in [0, 1)"));
  }
  auto got = state_->results->Compare(*request, OwnerOfCall(state_->identities, *context));
  if (!got.ok()) {
    if (got.status().code() == absl::StatusCode::kNotFound && by_run) {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat(got.status().message(), " (baseline_run ",
                       request->baseline_previous() ? "previous" : Quote(request->baseline_run()),
                       ", candidate_run ", Quote(request->candidate_run()), ")"));
    }
    return ToGrpcStatus(got.status());
  }
  *response = std::move(*got);
  return grpc::Status::OK;
}

grpc::Status ResultsService::DoExport(grpc::CallbackServerContext* context,
                                      const v1::ExportRequest* request,
                                      v1::ExportResponse* response) {
  if (grpc::Status s = CheckFilter(request->filter()); !s.ok()) return s;
  if (!v1::ExportFormat_IsValid(request->format())) {
    return Invalid(absl::StrCat("format: unknown value ", static_cast<int>(request->format())));
  }
  if (request->limit() > 100000) {
    return Invalid(absl::StrCat("limit: ", request->limit(), " is above 100000"));
  }
  auto got = state_->results->Export(*request, OwnerOfCall(state_->identities, *context));
  if (!got.ok()) return ToGrpcStatus(got.status());
  *response = std::move(*got);
  return grpc::Status::OK;
}

grpc::Status ResultsService::DoReproduce(grpc::CallbackServerContext* context,
                                         const v1::ReproduceRequest* request,
                                         v1::ReproduceResponse* response) {
  if (request->result_id().empty()) return Invalid("result_id: required");
  if (grpc::Status s = CheckName("result_id", request->result_id()); !s.ok()) return s;
  if (grpc::Status s = CheckName("device", request->device()); !s.ok()) return s;
  if (grpc::Status s = CheckAlpha(request->alpha()); !s.ok()) return s;
  // Another owner's submission result is NOT_FOUND like a missing one, and the re-run is the
  // caller's: its submissions, resolved for it.
  const std::string owner = OwnerOfCall(state_->identities, *context);
  auto original = state_->results->Get(request->result_id(), owner);
  if (!original.ok()) {
    if (original.status().code() == absl::StatusCode::kNotFound) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("result_id: no stored result ",
                                                                    Quote(request->result_id())));
    }
    return ToGrpcStatus(original.status());
  }
  const v1::Receipt& receipt = original->receipt();
  // The receipt as a custom suite of the one workload: same definition, seed and protocol,
  // named apart ("reproduce.<suite>", at most 128 characters): a served suite's name stays
  // with its whole content, and re-runs do not join the original's series.
  v1::BenchmarkRequest run;
  v1::SuiteDefinition* suite = run.mutable_custom_suite();
  *suite = receipt.definition();
  suite->set_name(absl::StrCat("reproduce.", receipt.definition().name()).substr(0, 128));
  suite->clear_workloads();
  // By the name the result carries, generated for workloads that declare none, or its axes.
  const v1::Workload* workload = FindWorkload(receipt.definition(), original->result());
  if (workload != nullptr) *suite->add_workloads() = *workload;
  if (suite->workloads_size() == 0) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("result_id: the stored definition has no workload ",
                                     Quote(receipt.workload())));
  }
  run.add_implementations(receipt.implementation());
  run.set_device(request->device());
  *run.mutable_protocol() = receipt.protocol();
  // The Benchmark path of every front, as the caller (its owner, deadline and cancellation):
  // the same validation, admission, queues, devices and recording as any other benchmark.
  // On this call's own thread (RawUnaryThread::kOwn), which waits for the report.
  std::promise<absl::StatusOr<v1::BenchmarkReport>> finished;
  std::future<absl::StatusOr<v1::BenchmarkReport>> report_of = finished.get_future();
  BenchmarkCallbacks callbacks;
  callbacks.done = [&finished](absl::StatusOr<v1::BenchmarkReport> report) {
    finished.set_value(std::move(report));
  };
  absl::StatusOr<std::shared_ptr<BenchmarkCall>> started =
      StartBenchmark(*state_, CallerOf(*state_, context), std::move(run), std::move(callbacks));
  if (!started.ok()) {
    return ToGrpcStatus(absl::Status(started.status().code(),
                                     absl::StrCat("re-run: ", started.status().message())));
  }
  absl::StatusOr<v1::BenchmarkReport> ran = report_of.get();  // `done` is called exactly once
  if (!ran.ok()) {
    return ToGrpcStatus(
        absl::Status(ran.status().code(), absl::StrCat("re-run: ", ran.status().message())));
  }
  const v1::BenchmarkReport& report = *ran;
  if (report.results_size() == 0) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "re-run: the benchmark returned no result");
  }
  *response->mutable_reproduced() = report.results(0);
  *response->mutable_original() = *original;
  // The same statistics as Compare: the stored samples against the fresh ones.
  v1::Environment environment;
  for (const v1::Environment& e : report.environments()) {
    if (e.device().name() == report.results(0).device()) environment = e;
  }
  *response->mutable_comparison() = CompareResults(*original, report.results(0), environment,
                                                   request->alpha() == 0 ? 0.05 : request->alpha());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* ResultsService::History(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  return RawUnary<v1::HistoryRequest, v1::HistoryResponse>(
      context, request, response, "History",
      [this](auto* c, const auto& r, auto* out) { return DoHistory(c, &r, out); });
}

grpc::ServerUnaryReactor* ResultsService::Leaderboard(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return RawUnary<v1::LeaderboardRequest, v1::LeaderboardResponse>(
      context, request, response, "Leaderboard",
      [this](auto* c, const auto& r, auto* out) { return DoLeaderboard(c, &r, out); });
}

grpc::ServerUnaryReactor* ResultsService::Compare(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  return RawUnary<v1::CompareRequest, v1::CompareResponse>(
      context, request, response, "Compare",
      [this](auto* c, const auto& r, auto* out) { return DoCompare(c, &r, out); });
}

// A re-run waits for a device: on a thread of its own, not gRPC's callback thread.
grpc::ServerUnaryReactor* ResultsService::Reproduce(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return RawUnary<v1::ReproduceRequest, v1::ReproduceResponse>(
      context, request, response, "Reproduce",
      [this](auto* c, const auto& r, auto* out) { return DoReproduce(c, &r, out); },
      RawUnaryThread::kOwn);
}

grpc::ServerUnaryReactor* ResultsService::Export(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  return RawUnary<v1::ExportRequest, v1::ExportResponse>(
      context, request, response, "Export",
      [this](auto* c, const auto& r, auto* out) { return DoExport(c, &r, out); });
}

}  // namespace kerneleval::server
