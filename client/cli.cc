#include "client/cli.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "client/push.h"
#include "client/results_command.h"
#include "client/token_source.h"
#include "common/enum_names.h"

namespace kerneleval::client::cli {
namespace {

void AddGlobalFlags(CLI::App* app, GlobalFlags* g) {
  app->add_option("--target", g->targets,
                  "Server address HOST:PORT (default localhost:50051). bench: repeatable, and a "
                  "name with several addresses means each of them")
      ->type_name("HOST:PORT");
  app->add_option("--deadline", g->deadline_seconds, "Seconds per call; for bench, the whole run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("--json", g->json,
                "Print responses as JSON: proto field names, 64-bit integers as numbers, enums "
                "by their short names (bf16, host_clock)");
  app->add_flag("--jsonl", g->jsonl,
                "Print JSON Lines: one compact object per row of a listing (history results or "
                "runs, comparisons, leaderboard entries, devices, submissions) or per bench "
                "result; any other answer on one line");
  // $KERNELEVAL_TOKEN is read by ResolveGlobalToken, in the token-file layout.
  auto* token = app->add_option("--token", g->token,
                                "Bearer token sent as `authorization` metadata (else "
                                "$KERNELEVAL_TOKEN, read like --token-file)");
  auto* token_file =
      app->add_option("--token-file", g->token_file,
                      "File of the token: one bare token, or the server's --auth-token-file "
                      "lines 'owner:token' (the line of --owner, or the only one); trimmed")
          ->type_name("PATH");
  token->excludes(token_file);
  app->add_option("--owner", g->owner,
                  "Which owner's line of --token-file or $KERNELEVAL_TOKEN to send")
      ->type_name("NAME");
  app->add_flag("--tls", g->tls, "Use TLS");
  app->add_option("--tls-ca", g->tls_ca, "PEM file of root certificates")->check(CLI::ExistingFile);
  auto* cert = app->add_option("--tls-cert", g->tls_cert, "PEM client certificate (mutual TLS)")
                   ->check(CLI::ExistingFile);
  auto* key = app->add_option("--tls-key", g->tls_key, "PEM client private key (mutual TLS)")
                  ->check(CLI::ExistingFile);
  cert->needs(key);
  key->needs(cert);
  app->add_option("--tls-server-name", g->tls_server_name,
                  "Name to check against the server certificate");
  app->add_option("--max-message-mib", g->max_message_mib,
                  "Largest message sent or received, in MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{2047}))
      ->capture_default_str();
}

// --batch 0 says so, not "0 not in range 0 to 1.79769e+308".
CLI::Validator AtLeastOne() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        long long value = 0;
        std::size_t used = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || value < 1)
          return "must be a whole number, 1 or more, not " + text;
        return "";
      },
      "N>=1");
}

void AddRunCommand(CLI::App* app, RunFlags* r) {
  CLI::App* run = app->add_subcommand("run", "Run the operation once on random or given inputs");
  auto* batch = run->add_option("--batch", r->batch, "Rows of random inputs")->check(AtLeastOne());
  auto* hidden =
      run->add_option("--hidden", r->hidden, "Columns of random inputs")->check(AtLeastOne());
  auto* dtype = run->add_option("--dtype", r->dtype, "Random inputs' dtype")
                    ->check(CLI::IsMember(DTypeSpellings()))
                    ->capture_default_str();
  auto* seed = run->add_option("--seed", r->seed, "Random inputs' seed")->capture_default_str();
  auto* input =
      run->add_option("--input", r->input, "safetensors file with hidden_states, residual, weight")
          ->check(CLI::ExistingFile);
  input->excludes(batch)->excludes(hidden)->excludes(dtype)->excludes(seed);
  // NumPy arrays, one file each (np.save; ml_dtypes.bfloat16 too): all three or none.
  auto* x = run->add_option("--hidden-states", r->hidden_states_npy, "hidden_states as .npy")
                ->check(CLI::ExistingFile);
  auto* res =
      run->add_option("--residual", r->residual_npy, "residual as .npy")->check(CLI::ExistingFile);
  auto* w = run->add_option("--weight", r->weight_npy, "weight as .npy")->check(CLI::ExistingFile);
  for (CLI::Option* npy : {x, res, w}) {
    npy->excludes(input)->excludes(batch)->excludes(hidden)->excludes(dtype)->excludes(seed);
  }
  x->needs(res)->needs(w);
  res->needs(x)->needs(w);
  w->needs(x)->needs(res);
  run->add_option("--mode", r->mode, "What the kernel writes")
      ->check(CLI::IsMember(ModeSpellings()))
      ->capture_default_str();
  run->add_option("--eps", r->eps, "RMSNorm epsilon (default 1e-6)")->check(CLI::PositiveNumber);
  run->add_option("--device", r->device, "cpu, cuda:0, ... (default: least loaded)");
  run->add_option("--impl", r->implementation, "Implementation (default: the device's)");
  // Checked by default, as in the Python client: a run that is fast and wrong should not
  // read as a result. --check is still accepted.
  run->add_flag("--check,!--no-check", r->check,
                "Compare against the fp64 reference (default; --no-check skips it)");
  run->add_option("--warmup", r->warmup, "Untimed calls first")->capture_default_str();
  run->add_option("--repetitions", r->repetitions, "Timed calls (1..1000)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  run->add_option("--timer", r->timer,
                  "Timer; auto: CUDA events on a GPU (CUPTI adds ~0.5 ms per call), host clock on "
                  "the CPU")
      ->check(CLI::IsMember(TimerSpellings()))
      ->capture_default_str();
  run->add_flag("--profile", r->profile,
                "Also profile the call's kernels, in replays after the timed calls (CUDA only)");
  run->add_option("--output", r->output, "Write output (and residual_out) as safetensors");
}

void AddBenchCommand(CLI::App* app, BenchFlags* b) {
  CLI::App* bench = app->add_subcommand("bench", "Run a benchmark suite and print its report");
  auto* suite = bench->add_option("--suite", b->suite, "Built-in suite name");
  auto* file = bench->add_option("--suite-file", b->suite_file, "Custom suite (JSON file)")
                   ->check(CLI::ExistingFile);
  suite->excludes(file);
  bench->add_option("--impl", b->implementations, "Implementation to rank (repeatable)")
      ->allow_extra_args(false);
  bench->add_option("--device", b->device, "cpu, cuda:0, ...");
  bench->add_flag("--all-devices", b->all_devices,
                  "Every local device of --device's kind (GPUs when --device is not given)");
  bench->add_option("--warmup", b->warmup, "Untimed calls first (server default 10)");
  auto* reps =
      bench->add_option("--repetitions", b->repetitions, "Fixed timed calls (server default 50)");
  auto* adaptive = bench->add_flag("--adaptive", b->adaptive,
                                   "Stop at a relative spread instead of fixed repetitions");
  adaptive->excludes(reps);
  bench->add_option("--min-samples", b->min_samples, "Adaptive: at least (default 10)")
      ->needs(adaptive);
  bench->add_option("--max-samples", b->max_samples, "Adaptive: at most (default 1000)")
      ->needs(adaptive);
  bench
      ->add_option("--target-spread", b->target_spread,
                   "Adaptive: stop below this stddev/mean (default 0.005)")
      ->check(CLI::Range(0.0, 1.0))
      ->needs(adaptive);
  bench
      ->add_option("--max-seconds", b->max_seconds,
                   "Adaptive: seconds per workload x implementation (default 5)")
      ->check(CLI::NonNegativeNumber)
      ->needs(adaptive);
  bench->add_option("--max-total-seconds", b->max_total_seconds, "Cap on the whole run")
      ->check(CLI::NonNegativeNumber);
  auto* hot = bench->add_flag("--hot", b->hot, "Do not flush caches between calls");
  auto* cold = bench->add_flag("--cold", b->cold, "Flush caches before every call (default)");
  hot->excludes(cold);
  auto* graph = bench->add_flag("--graph", b->graph, "Time calls replayed from a CUDA graph");
  bench->add_option("--graph-calls", b->graph_calls, "Calls per graph (default 20)")
      ->check(CLI::PositiveNumber)
      ->needs(graph);
  bench->add_flag("--rotate", b->rotate, "Rotate among input copies larger than L2");
  bench->add_option("--timer", b->timer, "Timer")
      ->check(CLI::IsMember(TimerSpellings()))
      ->capture_default_str();
  bench->add_option("--seed", b->seed, "Input generation seed (server default 200)");
  bench->add_flag("--measure-copy", b->measure_copy, "Also report SOL against a measured copy");
  bench->add_flag("--measure-dram-bytes", b->measure_dram_bytes,
                  "Also count DRAM bytes read and written per call (CUPTI range profiler)");
  bench->add_flag("--profile", b->profile,
                  "Also profile each kernel (throughput, memory, occupancy, stalls, roofline, "
                  "advice) in replays after the timed calls; CUDA devices only");
  bench->add_flag("--check-every-call", b->check_every_call,
                  "Check every call of the built-ins on the device, as submissions' calls are");
  bench
      ->add_option("--format", b->format,
                   "Report format (default table); jsonl: one JSON object per result and line")
      ->check(CLI::IsMember({"table", "json", "jsonl", "csv", "html"}));
  bench->add_option("--out", b->out, "Write the report to this file");
  bench
      ->add_option("--concurrency", b->concurrency,
                   "Targets benchmarked at once (several --target, or a name with many addresses)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  auto* push = bench
                   ->add_option("--pushgateway", b->pushgateway,
                                "Push each target's results to this Prometheus Pushgateway")
                   ->type_name("http://HOST:PORT");
  bench->add_option("--push-job", b->push_job, "Pushgateway job label")
      ->capture_default_str()
      ->needs(push);
  auto* compare_to =
      bench
          ->add_option("--compare-to", b->compare_to,
                       "After the run: compare it with RUN, or with 'previous' (the newest "
                       "complete run of the same suite content and protocol), and exit 1 on a "
                       "regression (see --fail-on)")
          ->type_name("previous|RUN");
  bench
      ->add_option("--fail-on", b->fail_on,
                   "With --compare-to: slower,inconclusive,incomparable,missing,noisy (default "
                   "slower,incomparable,missing); none: never")
      ->delimiter(',')
      ->check(CLI::IsMember({"slower", "inconclusive", "incomparable", "missing", "noisy", "none"}))
      ->needs(compare_to);
  bench
      ->add_option("--threshold", b->threshold,
                   "With --compare-to: the practical threshold t of compare")
      ->check(CLI::Range(0.0001, 0.5))
      ->capture_default_str()
      ->needs(compare_to);
  // Queued for any server of the fleet to run; the command returns at once with the run id.
  auto* detach = bench->add_flag("--detach", b->detach,
                                 "Queue the benchmark (any server sharing the results database "
                                 "may run it) and exit with its run id; see watch, cancel, queue");
  detach->excludes(compare_to)->excludes(push);
  bench->add_option("--priority", b->priority, "With --detach: the job's class in the queue")
      ->check(CLI::IsMember(PrioritySpellings()))
      ->capture_default_str()
      ->needs(detach);
  bench
      ->add_option("--runs-on", b->runs_on,
                   "With --detach: which servers may claim it: cpu, cuda or cuda:sm_XY (a GPU "
                   "architecture, e.g. cuda:sm_90), optionally @NODE for one node's server")
      ->needs(detach);
}

// Every command's --help ends with the exit codes (client/exit_codes.h).
void AddExitCodesFooter(CLI::App* app) {
  app->footer(kExitCodesHelp);
  for (CLI::App* sub : app->get_subcommands({})) AddExitCodesFooter(sub);
}

// The names of the commands, for the message about one that is not.
std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// `kerneleval frobnicate`: CLI11 says "A subcommand is required". The first word that is not
// a flag or a global option's value names the command the user meant; empty when every word
// is accounted for.
std::string UnknownCommand(const CLI::App& app, const std::vector<std::string>& args) {
  const std::vector<std::string> names = CommandNames(app);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word.rfind("-", 0) == 0) {
      // A global option with a separate value: skip the value.
      const CLI::Option* option = app.get_option_no_throw(word);
      if (option != nullptr && option->get_type_size() != 0 &&
          word.find('=') == std::string::npos) {
        ++i;
      }
      continue;
    }
    if (std::find(names.begin(), names.end(), word) != names.end()) return "";
    return word;
  }
  return "";
}

std::string UnknownCommandMessage(const CLI::App& app, const std::string& word) {
  std::string message = "unknown command '" + word + "'; commands:";
  for (const std::string& name : CommandNames(app)) message += " " + name;
  return message;
}

absl::Status ValidateBenchFanOut(const CliConfig& config) {
  const BenchFlags& b = config.bench;
  if (config.global.targets.size() > 1 && b.detach) {
    return absl::InvalidArgumentError(
        "--detach queues one job through one server: give one --target (any server of the fleet)");
  }
  if (config.global.targets.size() > 1 && !b.compare_to.empty()) {
    return absl::InvalidArgumentError("--compare-to: one target only");
  }
  if (config.global.targets.size() > 1 && b.format == "html") {
    return absl::InvalidArgumentError("--format html: one target only");
  }
  if (!b.pushgateway.empty()) {
    if (absl::StatusOr<PushgatewayAddress> url = ParsePushgatewayUrl(b.pushgateway); !url.ok()) {
      return url.status();
    }
    if (!IsValidPushJob(b.push_job)) {
      return absl::InvalidArgumentError("--push-job '" + b.push_job +
                                        "': letters, digits and _ . : - only");
    }
  }
  return absl::OkStatus();
}

// "HOST" dials HOST:50051, as the help says; addresses with a port, bracketed IPv6 with
// one, and gRPC URIs ("dns:", "unix:", ...) are left as they are.
std::string WithDefaultPort(const std::string& target) {
  if (target.empty() || target.find("://") != std::string::npos) return target;
  if (target[0] == '[') {
    return target.find("]:") == std::string::npos ? target + ":50051" : target;
  }
  const std::size_t colon = target.find(':');
  if (colon == std::string::npos) return target + ":50051";
  // "dns:host", "unix:path", "ipv4:..." are schemes: a port is digits after the only colon.
  return target;
}

absl::Status Validate(const CLI::App& app, CliConfig* config) {
  for (const CLI::App* sub : app.get_subcommands()) config->command = sub->get_name();
  config->global.token_given = app.get_option("--token")->count() > 0;
  if (config->global.jsonl) config->global.json = true;
  if (config->global.targets.size() > 1 && config->command != "bench") {
    return absl::InvalidArgumentError("--target: several targets are for bench only");
  }
  if (config->command == "bench") {
    if (absl::Status status = ValidateBenchFanOut(*config); !status.ok()) return status;
  }
  if (config->global.targets.empty()) config->global.targets.push_back("localhost:50051");
  for (std::string& target : config->global.targets) target = WithDefaultPort(target);
  SetRpcErrorTarget(config->global.targets.size() == 1 ? config->global.targets.front() : "");
  if (config->command == "run" && config->run.input.empty() &&
      config->run.hidden_states_npy.empty() &&
      (config->run.batch == 0 || config->run.hidden == 0)) {
    return absl::InvalidArgumentError(
        "run: give --input FILE.safetensors, --hidden-states / --residual / --weight FILE.npy, "
        "or --batch and --hidden");
  }
  if (config->command == "bench" && config->bench.suite.empty() &&
      config->bench.suite_file.empty()) {
    return absl::InvalidArgumentError("bench: give --suite NAME or --suite-file FILE");
  }
  if (IsResultsCommand(config->command)) {
    return ValidateResultsFlags(config->command, *ProcessResultsFlags());
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<CLI::App> BuildCliApp(CliConfig* config) {
  auto app = std::make_unique<CLI::App>(
      "kerneleval: evaluate fused residual-add + RMSNorm kernels on a kerneleval server",
      "kerneleval");
  // Global flags may also follow the subcommand: `kerneleval bench --suite x --json`.
  app->fallthrough();
  app->require_subcommand(1);
  AddGlobalFlags(app.get(), &config->global);
  app->add_subcommand("devices", "List the server's devices");
  app->add_subcommand("suites", "List the built-in benchmark suites");
  app->add_subcommand("implementations", "List implementations")
      ->add_option("--device", config->implementations_device, "Only this device's");
  app->add_subcommand("health", "grpc.health.v1 check; exit 0 when SERVING")
      ->add_option("--service", config->health_service,
                   "Service name (default readiness: devices ready; '' for the whole server)")
      ->capture_default_str();
  app->add_subcommand("services", "List services through server reflection");
  AddRunCommand(app.get(), &config->run);
  AddBenchCommand(app.get(), &config->bench);
  AddSubmitCommands(app.get(), &config->submit);
  AddResultsCommands(app.get(), ProcessResultsFlags());
  AddQueueCommands(app.get(), &config->queue);
  app->set_version_flag("--version", std::string("kerneleval ") + KERNELEVAL_VERSION,
                        "Print the client's version and exit");
  AddExitCodesFooter(app.get());
  return app;
}

absl::Status ParseArgs(const std::vector<std::string>& args, CliConfig* config) {
  std::unique_ptr<CLI::App> app = BuildCliApp(config);
  // CLI11 consumes its argument vector from the back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app->parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (const std::string word = UnknownCommand(*app, args); !word.empty()) {
      return absl::InvalidArgumentError(UnknownCommandMessage(*app, word));
    }
    return absl::InvalidArgumentError(e.what());
  }
  return Validate(*app, config);
}

absl::Status ResolveGlobalToken(GlobalFlags* g) {
  TokenSources sources;
  if (g->token_given) sources.flag = g->token;
  sources.file = g->token_file;
  sources.owner = g->owner;
  // An empty variable is an unset one, as it was when CLI11 read it.
  if (const char* env = std::getenv("KERNELEVAL_TOKEN"); env != nullptr && *env != '\0') {
    sources.environment = env;
  }
  absl::StatusOr<std::string> token = ResolveToken(sources);
  if (!token.ok()) return token.status();
  g->token = *std::move(token);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  CliConfig config;
  std::unique_ptr<CLI::App> app = BuildCliApp(&config);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      const std::vector<std::string> args(argv + 1, argv + argc);
      if (const std::string word = UnknownCommand(*app, args); !word.empty()) {
        std::cerr << "error: " << UnknownCommandMessage(*app, word)
                  << "\nRun with --help for more information.\n";
        return kExitUsage;
      }
    }
    // Prints help or the version (exit code 0) or the error with a usage hint.
    return app->exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (absl::Status status = Validate(*app, &config); !status.ok()) {
    std::cerr << "error: " << status.message() << "\nRun with --help for more information.\n";
    return kExitUsage;
  }
  if (absl::Status status = ResolveGlobalToken(&config.global); !status.ok()) {
    std::cerr << "error: " << status.message() << "\n";
    return kExitUsage;
  }
  if (IsSubmitCommand(config.command)) return RunSubmitCommand(config, std::cout, std::cerr);
  if (IsResultsCommand(config.command)) {
    return RunResultsCommand(config, *ProcessResultsFlags(), std::cout, std::cerr);
  }
  if (IsQueueCommand(config.command)) return RunQueueCommand(config, std::cout, std::cerr);
  return RunCommand(config, std::cout, std::cerr);
}

}  // namespace kerneleval::client::cli
