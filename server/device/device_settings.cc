#include "server/device/device_settings.h"

namespace kerneleval::server {
namespace {

DeviceSettings& Settings() {
  static DeviceSettings* settings = new DeviceSettings;  // read by threads until exit
  return *settings;
}

}  // namespace

void ApplyDeviceSettings(const DeviceSettings& settings) { Settings() = settings; }

const DeviceSettings& CurrentDeviceSettings() { return Settings(); }

std::vector<std::string> DeviceHostArgs(const DeviceSettings& settings) {
  std::vector<std::string> args;
  if (settings.disable_cupti) args.push_back("--disable-cupti");
  args.push_back("--clock-sample-ms");
  args.push_back(std::to_string(settings.clock_sample_ms));
  args.push_back("--link-spin-us");
  args.push_back(std::to_string(settings.link_spin_us));
  return args;
}

}  // namespace kerneleval::server
