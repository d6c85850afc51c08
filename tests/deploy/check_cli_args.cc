// Feeds its arguments to the `kerneleval` CLI's real parser (no RPCs) and prints what they
// mean, one `key=value` a line. Exit 0 when accepted, 2 with the parser's message when not.
#include <iostream>
#include <string>
#include <vector>

#include "client/cli.h"

int main(int argc, char** argv) {
  namespace cli = kerneleval::client::cli;
  cli::CliConfig config;
  const absl::Status status =
      cli::ParseArgs(std::vector<std::string>(argv + 1, argv + argc), &config);
  if (!status.ok()) {
    std::cerr << "rejected: " << status.message() << "\n";
    return cli::kExitUsage;
  }
  std::cout << "command=" << config.command << "\n";
  for (const std::string& target : config.global.targets) std::cout << "target=" << target << "\n";
  std::cout << "deadline_seconds=" << config.global.deadline_seconds << "\n";
  if (config.command == "bench") {
    std::cout << "suite=" << config.bench.suite << "\n"
              << "format=" << config.bench.format << "\n"
              << "concurrency=" << config.bench.concurrency << "\n"
              << "pushgateway=" << config.bench.pushgateway << "\n"
              << "push_job=" << config.bench.push_job << "\n";
  }
  return cli::kExitOk;
}
