// kerneleval-server: flags (server_flags.h), signals, and the server's lifetime. Everything
// else lives in the library so that tests run the same server in-process.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/app/server.h"
#include "server/app/server_flags.h"
#include "server/device/device_settings.h"
#include "server/evaluation/server_version.h"

namespace {

bool WritePortFile(const std::string& path, int grpc_port, int metrics_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "{\"grpc_port\": " << grpc_port << ", \"metrics_port\": " << metrics_port << "}\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// SIGTERM and SIGINT are taken by sigwait in main, so every thread starts with them blocked.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace

int main(int argc, char** argv) {
  namespace server = kerneleval::server;
  kerneleval::SetLogProgram("kerneleval-server");
  server::ServerCommandLine command_line;
  if (std::optional<int> exit_code = server::ParseServerCommandLine(argc, argv, &command_line)) {
    return *exit_code;
  }
  server::ApplyDeviceSettings(command_line.device_settings);
  sigset_t signals = BlockStopSignals();

  auto started = server::KernelEvalServer::Start(command_line.options);
  if (!started.ok()) {
    kerneleval::LogError(started.status().message());
    return 1;
  }
  server::KernelEvalServer& s = **started;
  kerneleval::LogInfo(absl::StrCat("version ", server::ServerVersion(), " listening on port ",
                                   s.grpc_port(), ", metrics on port ", s.metrics_port()));
  const std::string& port_file = command_line.port_file;
  if (!port_file.empty() && !WritePortFile(port_file, s.grpc_port(), s.metrics_port())) {
    kerneleval::LogError("--port-file: cannot write '" + port_file + "'");
    return 1;
  }

  int sig = 0;
  sigwait(&signals, &sig);
  const double drain_seconds = command_line.drain_seconds;
  kerneleval::LogInfo(absl::StrCat("signal ", sig, ", draining for up to ", drain_seconds, " s"));
  s.Shutdown(absl::Seconds(drain_seconds));
  kerneleval::LogInfo("stopped");
  return 0;
}
