// What a kerneleval command line says: the global flags and each command's, as CLI11 fills
// them (cli.h builds the parser). Apart from cli.h so that each command (submit_command.h,
// queue_command.h, results_command.h) reads its flags without including the CLI that
// dispatches to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/exit_codes.h"
#include "client/submit_client.h"

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
  bool profile = false;  // RunRequest.profile
  std::string output;    // Writes `output` (and `residual_out`) as safetensors.
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
  bool profile = false;     // Protocol.profile: each kernel's counters, figures and advice
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
  // --runs-on: which servers may claim it (cpu, cuda, cuda:sm_XY, each with an optional
  // @NODE); empty, the server decides. Checked by the server, which names the field.
  std::string runs_on;
};

struct SubmitFlags {
  SubmitSpec spec;
  bool show_log = false;        // print NVRTC's log on success too
  std::string suite;            // submit: benchmark this suite once registered
  bool profile = false;         // submit --suite: profile every implementation's kernels too
  std::string action = "list";  // submissions: list | get | delete
  std::string submission;       // submissions get|delete: id or name
};

struct QueueFlags {
  std::string run;  // watch / cancel
  unsigned ended_within_seconds = 3600;
  unsigned limit = 100;
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

}  // namespace kerneleval::client::cli
