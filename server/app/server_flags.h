// kerneleval-server's command line: every flag, its default and its check, and the files
// some flags name (the token file, the /metrics basic-auth file), read at parse time so that
// a server never starts with authentication it could not read.
#pragma once

#include <optional>
#include <string>

#include "server/app/server.h"
#include "server/device/device_settings.h"

namespace kerneleval::server {

// What the command line decides: the server's options, and the few values that belong to the
// process around it.
struct ServerCommandLine {
  ServerOptions options;
  // Where {"grpc_port":N,"metrics_port":M} is written once the server listens; empty: nowhere.
  std::string port_file;
  double drain_seconds = 30;  // grace period for accepted work on SIGTERM
  // --disable-cupti and the GPU scripts' environment (scripts/gpu-run.sh, gpu-overhead.sh),
  // applied by main before any backend is built.
  DeviceSettings device_settings;
};

// Parses argv into `*out`. Returns nothing when the server is to start, or the exit code to
// end with: 0 after --help or --version, CLI11's code for a flag it refused, 2 when
// --auth-token-file or --metrics-basic-auth-file cannot be read (logged).
std::optional<int> ParseServerCommandLine(int argc, char** argv, ServerCommandLine* out);

}  // namespace kerneleval::server
