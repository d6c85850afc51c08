// kerneleval-planted-device-host: kerneleval-device-host with the planted implementations of
// tests registered on its GPU (lazy_half_rows, beside the built-ins and, with
// --enable-fault-injection, fault_illegal_address), so that a test can run them in a device
// host through a real server (ServerOptions::device_host_path) while the product device host
// carries none. Takes the flags the server passes to a device host (process_backend.cc);
// serves GPUs only.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/log.h"
#include "lazy_half_rows.h"
#include "server/cuda/cuda_backend.h"
#include "server/device/device_host.h"
#include "server/device/device_settings_flags.h"
#include "server/device/nvml.h"

int main(int argc, char** argv) {
  namespace server = kerneleval::server;
  kerneleval::SetLogProgram("kerneleval-planted-device-host");
  kerneleval::RouteProtobufLogs();
  signal(SIGINT, SIG_IGN);  // the server ends a host by closing its channel
  signal(SIGTERM, SIG_IGN);

  std::string device;
  int channel_fd = 3, region_fd = 4;
  bool fault_injection = false, builtins_only = false;
  CLI::App app{"kerneleval-planted-device-host: a device host with the tests' planted kernels"};
  app.add_option("--device", device, "cuda:N")->required();
  app.add_option("--channel-fd", channel_fd, "Inherited socket to the server");
  app.add_option("--region-fd", region_fd, "Inherited shared tensor region");
  app.add_flag("--enable-fault-injection", fault_injection, "Register fault_illegal_address");
  app.add_flag("--builtins-only", builtins_only, "Refuse submitted kernels");
  server::DeviceSettings settings;  // the server's, as the product host takes them
  server::AddDeviceSettingsFlags(app, settings);
  CLI11_PARSE(app, argc, argv);
  server::ApplyDeviceSettings(settings);
  server::Nvml::ParentIsTheService();  // the server's other hosts are not other processes

  int ordinal = -1;
  if (!absl::StartsWith(device, "cuda:") || !absl::SimpleAtoi(device.substr(5), &ordinal)) {
    kerneleval::LogError("--device: this host serves GPUs only (cuda:N), got '" + device + "'");
    return 2;
  }
  std::vector<server::CudaImplementation> impls = server::BuiltinCudaImplementations();
  if (fault_injection) impls.push_back(server::FaultInjectionImplementation());
  impls.push_back(kerneleval::testing::LazyHalfRowsImplementation());
  server::CudaBackend backend(ordinal, std::move(impls));
  if (!builtins_only) backend.AllowSubmissions();
  return server::ServeDeviceHost(backend, channel_fd, region_fd);
}
