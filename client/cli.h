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

#include "client/cli_config.h"
#include "client/cli_output.h"
#include "client/exit_codes.h"
#include "client/kerneleval_client.h"
#include "client/queue_command.h"
#include "client/submit_command.h"

#include "absl/status/status.h"

namespace kerneleval::client::cli {

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

}  // namespace kerneleval::client::cli
