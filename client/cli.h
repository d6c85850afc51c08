// The `kerneleval` command line: argument parsing (no RPCs) and command execution.
//
// Parsing is separate so that tests, and checks of the arguments that scheduled jobs pass,
// can validate an argument list without a server. Exit codes: client/exit_codes.h, one
// meaning each. bench on several targets (see client/fanout.h): kExitInfrastructure if any
// target's RPC or a push to the Pushgateway failed, else kExitIncorrect if any result failed,
// else kExitIncomplete if any report is incomplete, else 0.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/exit_codes.h"
#include "client/kerneleval_client.h"
#include "client/queue_command.h"
#include "client/submit_command.h"

#include "absl/status/status.h"

namespace kerneleval::client::cli {

using client::ExitCode;
using client::kExitIncomplete;
using client::kExitIncorrect;
using client::kExitInfrastructure;
using client::kExitInterrupted;
using client::kExitOk;
using client::kExitRegression;
using client::kExitUsage;

struct GlobalFlags {
  std::vector<std::string> targets;  // Repeatable for bench; one for the other commands.
  double deadline_seconds = 300;
  bool json = false;
  bool jsonl = false;  // --jsonl: JSON Lines (json is set with it)
  // The bearer token sent (ResolveGlobalToken, client/token_source.h): --token, else the line
  // of --token-file, else of $KERNELEVAL_TOKEN, for --owner (or the only line).
  std::string token;
  bool token_given = false;  // --token was on the command line (possibly empty: no token).
  std::string token_file;
  std::string owner;
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  int64_t max_message_mib = 1024;
};

struct RunFlags {
  // Random inputs ...
  int64_t batch = 0;
  int64_t hidden = 0;
  std::string dtype = "bf16";
  uint64_t seed = 200;
  // ... or tensors hidden_states, residual, weight from a safetensors file ...
  std::string input;
  // ... or from three NumPy .npy files (np.save), all three given.
  std::string hidden_states_npy, residual_npy, weight_npy;
  std::string mode = "output";
  double eps = 0;  // 0 = the server's default (1e-6).
  std::string device;
  std::string implementation;
  bool check = true;  // --no-check: false
  uint32_t warmup = 0;
  uint32_t repetitions = 1;
  std::string timer = "auto";
  std::string output;  // Writes `output` (and `residual_out`) as safetensors.
};

// Zero / empty values mean "the server's default" (see the Protocol message).
struct BenchFlags {
  std::string suite;
  std::string suite_file;
  std::vector<std::string> implementations;
  std::string device;
  bool all_devices = false;
  std::optional<uint32_t> warmup;       // unset: the server's default
  std::optional<uint32_t> repetitions;  // unset: the server's default
  bool adaptive = false;
  uint32_t min_samples = 0;
  uint32_t max_samples = 0;
  double target_spread = 0;
  double max_seconds = 0;
  double max_total_seconds = 0;
  bool hot = false;
  bool cold = false;
  bool graph = false;
  uint32_t graph_calls = 0;
  bool rotate = false;
  std::string timer = "auto";
  std::optional<uint64_t> seed;  // unset: the server's default
  bool measure_copy = false;
  bool measure_dram_bytes = false;
  bool check_every_call = false;
  std::string format;       // table | json | jsonl | csv | html; empty = table (json with --json).
  std::string out;          // Write the report here instead of stdout.
  int concurrency = 4;      // Targets benchmarked at once.
  std::string pushgateway;  // http://HOST:PORT: push each target's results there.
  std::string push_job = "kerneleval-benchmark";
  // --compare-to previous|RUN (client/bench_gate.h) and what fails it.
  std::string compare_to;
  std::vector<std::string> fail_on;  // empty: slower,incomparable,missing
  double threshold = 0.01;
  double alpha = 0.05;
  // --detach: queued (client/queue_command.h) instead of run on this connection, at
  // --priority (a PrioritySpellings() name).
  bool detach = false;
  std::string priority = "waited_for";
};

struct CliConfig {
  GlobalFlags global;
  std::string command;  // The chosen subcommand's name.
  std::string implementations_device;
  // Default readiness: the server is up and its devices are ready ("" = the whole server,
  // which is SERVING before the devices are).
  std::string health_service = "readiness";
  RunFlags run;
  BenchFlags bench;
  SubmitFlags submit;  // submit, submissions (client/submit_command.h)
  QueueFlags queue;    // watch, cancel, queue (client/queue_command.h)
};

// Builds the parser; parsing writes into `*config`, which must outlive the app.
std::unique_ptr<CLI::App> BuildCliApp(CliConfig* config);

// Parses `args` (without the program name) and checks the cross-flag rules CLI11 cannot
// express (one target except for bench; run needs --input or --batch and --hidden; bench needs
// exactly one of --suite, --suite-file; a valid --pushgateway URL and --push-job).
// INVALID_ARGUMENT with the parser's message on a usage error.
absl::Status ParseArgs(const std::vector<std::string>& args, CliConfig* config);

// Sets `g->token` from its sources (client/token_source.h); reads --token-file and
// $KERNELEVAL_TOKEN. INVALID_ARGUMENT naming the file or variable when no token can be taken.
absl::Status ResolveGlobalToken(GlobalFlags* g);

// Executes a parsed command against the server; returns an ExitCode.
int RunCommand(const CliConfig& config, std::ostream& out, std::ostream& err);

// argv in, exit code out: parse, print help or usage errors, run.
int Main(int argc, char** argv);

// What every command shares (client/cli_commands.cc): the connection the global flags
// describe, and an RPC error printed as "error: CODE: message" (returns
// kExitInfrastructure).
// RpcError adds what to do where the code says it: UNAVAILABLE asks whether the server runs
// at the address (SetRpcErrorTarget, which parsing sets), RESOURCE_EXHAUSTED names the
// message-size flags of both sides.
ClientOptions ToClientOptions(const GlobalFlags& g);
int RpcError(std::ostream& err, const grpc::Status& status);
void SetRpcErrorTarget(const std::string& target);
// `message` as JSON (report_format.h MessageToJson) and a newline, or with --jsonl as JSON
// Lines (MessageToJsonLines); kExitOk, or kExitInfrastructure with "error: message" when it cannot
// be printed.
int PrintJson(const GlobalFlags& g, std::ostream& out, std::ostream& err,
              const google::protobuf::Message& message);

}  // namespace kerneleval::client::cli
