// `kerneleval watch | cancel | queue`, and `bench --detach`: the verdict queue's commands, on a
// QueueClient. Any server of a fleet sharing one results database answers for every job.
//
//   kerneleval bench --suite S --detach [--priority waited_for|scheduled|reproduction]
//       queues the benchmark and prints its run id and position; exits at once
//   kerneleval watch RUN     each change of the job's state until it ends; exits 0 when done,
//                            4 (incomplete) when cancelled or cut short, 5 when it failed
//   kerneleval cancel RUN    a queued job ends at once, a running one at its next heartbeat
//   kerneleval queue [--ended-within SECONDS] [--limit N]
//                            the caller's jobs, with positions and estimated starts
// RUN: a run id, or its first 8 characters or more. --json prints the messages.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "client/cli_config.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client::cli {

// Adds the subcommands, writing their flags into `*flags` (which must outlive the app).
void AddQueueCommands(CLI::App* app, QueueFlags* flags);
bool IsQueueCommand(const std::string& command);
int RunQueueCommand(const CliConfig& config, std::ostream& out, std::ostream& err);

// bench --detach: `request` queued with the bench flags' priority; prints the job.
int RunBenchDetached(const CliConfig& config, const v1::BenchmarkRequest& request,
                     std::ostream& out, std::ostream& err);

// The priority names --priority takes, as the README spells them.
const std::vector<std::string>& PrioritySpellings();

}  // namespace kerneleval::client::cli
