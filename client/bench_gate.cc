#include "client/bench_gate.h"

#include <chrono>
#include <iostream>
#include <thread>

#include "client/cli_output.h"
#include "client/results_client.h"
#include "client/results_command.h"

namespace kerneleval::client::cli {
namespace {

// The store writes a report on its own thread after the Benchmark answer: true once
// `history --runs --run ID` lists the run.
grpc::Status WaitUntilStored(const ResultsClient& client, const std::string& run_id) {
  v1::HistoryRequest request;
  request.set_runs(true);
  request.mutable_filter()->set_run_id(run_id);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    v1::HistoryResponse response;
    if (grpc::Status s = client.History(request, &response); !s.ok()) return s;
    if (response.runs_size() > 0) return grpc::Status::OK;
    if (std::chrono::steady_clock::now() > give_up) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "run " + run_id + " was not stored within 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int GateAgainstBaseline(const CliConfig& config, const std::string& run_id, bool report_is_table,
                        std::ostream& out, std::ostream& err) {
  const BenchFlags& flags = config.bench;
  if (run_id.empty()) {
    err << "error: --compare-to: the server keeps no results store, so the run cannot be "
           "compared (kerneleval-server --data-dir or --results-db)\n";
    return kExitInfrastructure;
  }
  const ClientOptions options = ToClientOptions(config.global);
  std::shared_ptr<grpc::Channel> channel;
  if (grpc::Status s = MakeChannel(options, &channel); !s.ok()) return RpcError(err, s);
  const ResultsClient client(channel, options);
  if (grpc::Status s = WaitUntilStored(client, run_id); !s.ok()) return RpcError(err, s);

  v1::CompareRequest request;
  request.set_candidate_run(run_id);
  if (flags.compare_to == "previous") {
    request.set_baseline_previous(true);
  } else {
    request.set_baseline_run(flags.compare_to);
  }
  request.set_alpha(flags.alpha);
  request.set_min_relative_difference(flags.threshold);
  v1::CompareResponse response;
  if (grpc::Status s = client.Compare(request, &response); !s.ok()) return RpcError(err, s);

  ResultsFlags shown;
  shown.fail_on = flags.fail_on;
  shown.threshold = flags.threshold;
  shown.alpha = flags.alpha;
  CliConfig printed = config;
  if (!report_is_table) printed.global.json = printed.global.jsonl = false;
  std::ostream& where = report_is_table ? out : err;
  where << "compared with " << (flags.compare_to == "previous" ? "the previous run " : "run ")
        << response.baseline_run() << ":\n";
  return PrintComparison(printed, response, shown, where, err);
}

}  // namespace kerneleval::client::cli
