// `kerneleval bench ... --compare-to previous|RUN`: the gate of a nightly job in one command.
// After a bench that completed and was stored, its run is compared (the server's Compare) with
// RUN, or with the newest complete run before it of the same suite content and protocol, and
// the exit code is compare's: kExitRegression on a row slower, missing or not comparable (by
// default; --fail-on narrows it), kExitInfrastructure when there is no such run.
#pragma once

#include <iosfwd>
#include <string>

namespace kerneleval::client::cli {

struct CliConfig;

// `run_id`: the bench's stored run. Waits (polling history, up to 30 s) until the server's
// store has written it, then compares. The comparison goes to `out` when the report is a
// table, else to `err`, so that a JSON, CSV or HTML document on stdout stays one document.
int GateAgainstBaseline(const CliConfig& config, const std::string& run_id, bool report_is_table,
                        std::ostream& out, std::ostream& err);

}  // namespace kerneleval::client::cli
