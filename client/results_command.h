// `kerneleval history | leaderboard | compare | reproduce | export`: the results store's
// commands, on a ResultsClient.
//
//   kerneleval history [--suite S --workload W --impl I --gpu H200 --since T --until T]
//   kerneleval leaderboard --suite S [--gpu H200]
//   kerneleval compare RUN_A RUN_B [--threshold 0.01] [--fail-on slower[,inconclusive]]
//   kerneleval compare --impl I --suite S --baseline-since T --baseline-until T
//                      --candidate-since T --candidate-until T
//   kerneleval reproduce RESULT_ID [--device D] [--fail-on slower]
// compare and reproduce exit with kExitRegression (1) when a row's verdict is one named by
// --fail-on; compare's default is slower,incomparable,missing.
//   kerneleval export [filters] --format jsonl|csv|trace [--out FILE]
// Times T: Unix seconds, YYYY-MM-DD or RFC 3339 (UTC). --json prints the responses.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "kerneleval/v1/results.pb.h"

namespace kerneleval::client::cli {

struct CliConfig;

struct ResultsFlags {
  std::string suite, workload, implementation, gpu, run, device;
  // leaderboard, history, export --protocol: a protocol label ("cold", "hot_graph")
  std::string protocol;
  std::string since, until;
  std::string baseline_since, baseline_until, candidate_since, candidate_until;
  std::vector<std::string> runs;  // compare A B / reproduce ID
  unsigned page_size = 50;        // history --limit
  unsigned export_limit = 1000;   // export --limit: the service's own default
  std::string page_token;
  bool samples = false;
  bool list_runs = false;      // history --runs: one row per run
  bool complete_only = false;  // history --runs --complete
  double alpha = 0.05;
  double threshold = 0.01;  // compare: the practical threshold t
  // compare, reproduce, bench --compare-to: verdicts that exit with kExitRegression; empty
  // for compare: EffectiveFailOn's default.
  std::vector<std::string> fail_on;
  std::string format = "jsonl";
  std::string out;
};

// Adds the subcommands, writing their flags into `*flags` (which must outlive the app).
void AddResultsCommands(CLI::App* app, ResultsFlags* flags);

bool IsResultsCommand(const std::string& command);

// Cross-flag rules (compare: two runs or --impl with windows); INVALID_ARGUMENT naming the flag.
absl::Status ValidateResultsFlags(const std::string& command, const ResultsFlags& flags);

// history's table: one row per stored result, its status as every format names it
// (common/enum_names.h).
std::string FormatHistory(const v1::HistoryResponse& response);

// The verdict words a comparison fails on: `given` without "none", or the default
// (slower, incomparable, missing) when nothing was given.
std::vector<std::string> EffectiveFailOn(const std::vector<std::string>& given);

// kExitRegression, after a line on `err` per word counted, when a row's verdict is one of
// `fail_on` ("missing": a row the candidate lacks); kExitOk otherwise.
int FailOn(const std::vector<std::string>& fail_on,
           const google::protobuf::RepeatedPtrField<v1::SampleComparison>& rows,
           const google::protobuf::RepeatedPtrField<v1::MissingRow>& missing, std::ostream& err);

// compare's output: the table (or --json), the rows missing on either side, the totals; then
// the exit code of FailOn with EffectiveFailOn(flags.fail_on). Also `bench --compare-to`'s.
int PrintComparison(const CliConfig& config, const v1::CompareResponse& response,
                    const ResultsFlags& flags, std::ostream& out, std::ostream& err);

// Runs one of the commands; returns an ExitCode (cli.h).
int RunResultsCommand(const CliConfig& config, const ResultsFlags& flags, std::ostream& out,
                      std::ostream& err);

// The flags the app built by BuildCliApp writes into: CliConfig (cli.h) has no member for
// them yet, so the CLI keeps one set per process.
ResultsFlags* ProcessResultsFlags();

}  // namespace kerneleval::client::cli
