// The flags that carry DeviceSettings on a device host's command line (DeviceHostArgs writes
// them): one declaration for every device-host main, so that a host built for tests accepts
// exactly what the server passes to the product one.
#pragma once

#include <CLI/CLI.hpp>

#include "server/device/device_settings.h"

namespace kerneleval::server {

inline void AddDeviceSettingsFlags(CLI::App& app, DeviceSettings& settings) {
  app.add_flag("--disable-cupti", settings.disable_cupti, "Time with CUDA events only");
  app.add_option("--clock-sample-ms", settings.clock_sample_ms,
                 "Clock readings while timing, every N ms (0: before and after only)");
  app.add_option("--link-spin-us", settings.link_spin_us,
                 "Poll the server link this long before sleeping (negative: by core count)");
}

}  // namespace kerneleval::server
