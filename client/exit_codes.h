// The exit codes of `kerneleval`, one meaning each, and the text every `--help` ends with.
//
// A nightly job branches on them: `bench --compare-to previous` exits kExitRegression only for
// a regression (or a row that is missing or cannot be compared), kExitIncomplete when the run
// did not measure everything it was asked to, and kExitInfrastructure when the server could
// not be reached or something named does not exist. README.md lists the same table.
#pragma once

namespace kerneleval::client {

enum ExitCode : int {
  kExitOk = 0,
  // compare / reproduce / bench --compare-to: a row slower, missing or not comparable (the
  // verdicts --fail-on names).
  kExitRegression = 1,
  // Bad flags or arguments, found before anything is sent (CLI11's own code is 2 as well).
  kExitUsage = 2,
  // The command completed but a result failed correctness or was rejected (or errored).
  kExitIncorrect = 3,
  // A bench that did not measure everything: cut by --max-total-seconds, results skipped, or
  // the --deadline passed. It prints what finished and the run id.
  kExitIncomplete = 4,
  // The server is unreachable, refused the call, or what was named does not exist (any RPC
  // error); local files that cannot be written.
  kExitInfrastructure = 5,
  // Ctrl-C: 128 + SIGINT, as a shell reports a command that Ctrl-C ended.
  kExitInterrupted = 130
};

// The footer of every `--help`: the table above in one line per code.
inline constexpr char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0    success\n"
    "  1    regression: a compared row slower, missing or not comparable (--fail-on)\n"
    "  2    usage: bad flags or arguments\n"
    "  3    incorrect: a result failed correctness, errored or was rejected\n"
    "  4    incomplete: a bench cut by --max-total-seconds, with skipped results, or past\n"
    "       --deadline (what finished and the run id are printed)\n"
    "  5    infrastructure: server unreachable, call refused, or not found\n"
    "  130  interrupted (Ctrl-C)";

}  // namespace kerneleval::client
