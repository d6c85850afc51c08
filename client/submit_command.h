// `kerneleval submit` and `kerneleval submissions [list|get|delete]`: flags and execution.
//
//   kerneleval submit --source k.cu --entry k --block 256 --rows-per-block 1 --name n
//       [--dtype bf16 --mode output --suite S --device D]
// registers the kernel (printing its compile report) and, with --suite, benchmarks it beside
// the device's built-in implementations through the same path as `kerneleval bench`.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "client/cli_config.h"

namespace kerneleval::client::cli {

// Adds the `submit` and `submissions` subcommands.
void AddSubmitCommands(CLI::App* app, SubmitFlags* flags);

bool IsSubmitCommand(const std::string& command);

// Runs `submit` or `submissions`; returns an ExitCode (cli.h).
int RunSubmitCommand(const CliConfig& config, std::ostream& out, std::ostream& err);

}  // namespace kerneleval::client::cli
