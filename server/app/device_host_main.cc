// kerneleval-device-host: one device, served to kerneleval-server over descriptors it
// inherits. Started by the server (process_backend.cc), never by hand.
#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "server/app/device_factory.h"
#include "server/device/device_host.h"
#include "server/device/device_settings_flags.h"
#ifdef KERNELEVAL_HAVE_CUDA
#include "server/device/nvml.h"
#endif

int main(int argc, char** argv) {
  kerneleval::SetLogProgram("kerneleval-device-host");
  kerneleval::RouteProtobufLogs();
  // The server decides when a host ends, by closing its channel after draining.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);

  std::string device;
  int channel_fd = 3, region_fd = 4;
  bool fault_injection = false;
  CLI::App app{"kerneleval-device-host: serves one device to kerneleval-server"};
  app.add_option("--device", device, "cpu | cpu:N | cuda:N")->required();
  app.add_option("--channel-fd", channel_fd, "Inherited socket to the server")
      ->capture_default_str();
  app.add_option("--region-fd", region_fd, "Inherited shared tensor region")->capture_default_str();
  app.add_flag("--enable-fault-injection", fault_injection,
               "Register test-only implementations that fault on purpose");
  bool builtins_only = false;
  app.add_flag("--builtins-only", builtins_only,
               "Refuse submitted kernels: this host's context holds other callers' data");
  kerneleval::server::DeviceSettings settings;  // the server's, on this command line
  kerneleval::server::AddDeviceSettingsFlags(app, settings);
  CLI11_PARSE(app, argc, argv);
  kerneleval::server::ApplyDeviceSettings(settings);
#ifdef KERNELEVAL_HAVE_CUDA
  kerneleval::server::Nvml::ParentIsTheService();  // NVML is read by CUDA devices only
#endif
  if (fault_injection) {
    // fault_crash aborts on purpose: no core file for an expected crash.
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
  }

  auto backend = kerneleval::server::CreateBackend(device, fault_injection,
                                                   /*in_device_host=*/true,
                                                   /*allow_submissions=*/!builtins_only);
  if (!backend.ok()) {
    kerneleval::LogError(backend.status().message());
    return 2;
  }
  return kerneleval::server::ServeDeviceHost(**backend, channel_fd, region_fd);
}
