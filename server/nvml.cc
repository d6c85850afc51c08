#include "server/nvml.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "server/metrics.h"

namespace kerneleval::server {
namespace {

// From nvml.h (NVML API version 12).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
constexpr int NVML_TEMPERATURE_GPU = 0;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

template <typename F>
bool Load(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*driver)(char*, unsigned int) = nullptr;
};

Nvml& Nvml::Get() {
  static Nvml* nvml = new Nvml;
  return *nvml;
}

Nvml::Nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    status_ = "libnvidia-ml.so.1 not found (no NVIDIA driver): no clock data";
    return;
  }
  auto* api = new Api;
  // nvmlDeviceGetCurrentClocksEventReasons replaced the ...ThrottleReasons name in newer
  // drivers; both return the same mask.
  const bool ok = Load(lib, "nvmlInit_v2", &api->init) &&
                  Load(lib, "nvmlDeviceGetHandleByUUID", &api->by_uuid) &&
                  Load(lib, "nvmlDeviceGetClockInfo", &api->clock) &&
                  (Load(lib, "nvmlDeviceGetCurrentClocksEventReasons", &api->reasons) ||
                   Load(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", &api->reasons)) &&
                  Load(lib, "nvmlDeviceGetTemperature", &api->temperature) &&
                  Load(lib, "nvmlDeviceGetPowerUsage", &api->power) &&
                  Load(lib, "nvmlDeviceGetMemoryInfo", &api->memory) &&
                  Load(lib, "nvmlSystemGetDriverVersion", &api->driver);
  if (!ok) {
    status_ = "libnvidia-ml.so.1 lacks a needed symbol: no clock data";
    delete api;
    return;
  }
  const nvmlReturn_t r = api->init();
  if (r != NVML_SUCCESS) {
    status_ = absl::StrCat("nvmlInit failed (", r, "): no clock data");
    delete api;
    return;
  }
  api_ = api;
  available_ = true;
  status_ = "NVML";
}

std::string Nvml::DriverVersion() const {
  if (!available_) return "";
  char buf[96] = {};
  return api_->driver(buf, sizeof(buf)) == NVML_SUCCESS ? std::string(buf) : std::string();
}

bool Nvml::ReadClocks(const std::string& uuid, v1::Clocks* out) const {
  if (!available_) return false;
  nvmlDevice_t dev = nullptr;
  if (api_->by_uuid(uuid.c_str(), &dev) != NVML_SUCCESS) return false;
  unsigned int v = 0;
  if (api_->clock(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS) out->set_sm_mhz(v);
  if (api_->clock(dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) out->set_memory_mhz(v);
  unsigned long long mask = 0;
  if (api_->reasons(dev, &mask) == NVML_SUCCESS) {
    out->set_throttle_reasons(mask);
    ThrottleReasonNames(mask, out);
  }
  if (api_->temperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) out->set_temperature_c(v);
  if (api_->power(dev, &v) == NVML_SUCCESS) out->set_power_watts(v / 1000.0);
  nvmlMemory_t mem{};
  if (api_->memory(dev, &mem) == NVML_SUCCESS) out->set_memory_used_bytes(mem.used);
  return true;
}

void ThrottleReasonNames(std::uint64_t mask, v1::Clocks* out) {
  for (const auto& [bit, label] : ThrottleReasons()) {
    if ((mask & bit) != 0) out->add_throttle_reason_names(label);
  }
}

}  // namespace kerneleval::server
