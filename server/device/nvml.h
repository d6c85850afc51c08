// NVML, loaded at run time with dlopen("libnvidia-ml.so.1"): Debian ships neither nvml.h
// nor the library, and a host without the driver simply has no clock data. Only the few
// functions used here are declared. Reads only: clocks and limits are never set.
#pragma once

#include <cstdint>
#include <string>

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::server {

class Nvml {
 public:
  // The process-wide instance; Available() false when the library or a symbol is missing
  // or nvmlInit fails.
  static Nvml& Get();
  bool Available() const { return available_; }
  const std::string& status() const { return status_; }

  std::string DriverVersion() const;
  // Clocks, throttle reasons, temperature, power and memory in use of the GPU with this
  // UUID ("GPU-xxxxxxxx-..."). False when the GPU is unknown to NVML.
  bool ReadClocks(const std::string& uuid, v1::Clocks* out) const;
  // The GPU's maximum SM clock in MHz (0 when unknown).
  unsigned MaxSmClockMhz(const std::string& uuid) const;
  // Processes with a compute context on the GPU other than this one, its parent and its
  // children (and, in a device host, its parent's other children); -1 when NVML cannot list
  // them (old driver, a sandbox that hides them).
  int OtherComputeProcesses(const std::string& uuid) const;

  // Called once by kerneleval-device-host's main, before any device is opened: its parent is
  // the server, whose other children are the service's own device and tenant hosts. Those
  // hold contexts on the same GPUs but run nothing while this host measures (one device
  // worker runs one job at a time per GPU), so they are not "other processes" to wait for:
  // counted as such, every workload of every implementation waited the full idle limit
  // (1 s) whenever a tenant host was alive beside the built-in one.
  static void ParentIsTheService();

 private:
  Nvml();
  static bool parent_is_service_;
  bool available_ = false;
  std::string status_;
  struct Api;
  Api* api_ = nullptr;  // leaked on purpose: NVML stays loaded for the process lifetime
};

// Names of the reasons set in an NVML clocks-event mask.
void ThrottleReasonNames(std::uint64_t mask, v1::Clocks* out);

}  // namespace kerneleval::server
