// `kerneleval bench`: the request its flags describe, run on one target or fanned out over
// several, the report printed or written, pushed, and gated (--compare-to). Apart from the
// CLI's dispatch (cli.h) so that `submit --suite` benchmarks through it too.
#pragma once

#include <iosfwd>

#include "client/cli_config.h"

namespace kerneleval::client::cli {

// Runs `config.bench` against `config.global`'s targets; returns an ExitCode.
int RunBenchCommand(const CliConfig& config, std::ostream& out, std::ostream& err);

}  // namespace kerneleval::client::cli
