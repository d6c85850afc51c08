// Settings of the device code that hold for a whole process: decided by its main
// (kerneleval-server from its flags and environment, kerneleval-device-host from its command
// line), never read from the environment below it. A device host gets the server's settings
// on its command line (DeviceHostArgs), so both ends of a device agree.
#pragma once

#include <string>
#include <vector>

namespace kerneleval::server {

struct DeviceSettings {
  // CUDA events only: CUPTI is never loaded (--disable-cupti).
  bool disable_cupti = false;
  // Clock readings while the timed samples run, every this many ms; 0: one right before the
  // first timed sample and one right after the last. Reading NVML every 10 ms while the
  // samples ran moved the cold CUPTI median of the 1-row kernel from 1.649 to 1.760 us
  // (+6.8%, H200, docs/results/measurement-h200.md): the clock reader perturbs the timing.
  int clock_sample_ms = 0;
  // How long a waiting end of the device-host link polls before it sleeps on the socket, in
  // us; negative: 500 on machines of 8 cores or more, else 0 (device_host_channel.h).
  int link_spin_us = -1;
};

// Makes `settings` this process's; called by a main before it builds the first backend.
void ApplyDeviceSettings(const DeviceSettings& settings);
// This process's settings (the defaults until a main applies others).
const DeviceSettings& CurrentDeviceSettings();

// `settings` as kerneleval-device-host flags (device_host_main.cc parses them).
std::vector<std::string> DeviceHostArgs(const DeviceSettings& settings);

}  // namespace kerneleval::server
