#include "server/device/nvml.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"

namespace kerneleval::server {
namespace {

// From nvml.h (NVML API version 12).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
// nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v3 (and _v2: same layout).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// The parent of `pid` from /proc/<pid>/stat ("pid (comm) state ppid ..."); 0 if unknown.
unsigned int ParentOf(unsigned int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return 0;
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  char state = 0;
  unsigned int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

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
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned int*) = nullptr;                 // optional
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;  // optional
};

bool Nvml::parent_is_service_ = false;

void Nvml::ParentIsTheService() { parent_is_service_ = true; }

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
  // Optional: admission (clock_admission.h) works with less where these are missing.
  Load(lib, "nvmlDeviceGetMaxClockInfo", &api->max_clock);
  if (!Load(lib, "nvmlDeviceGetComputeRunningProcesses_v3", &api->processes)) {
    Load(lib, "nvmlDeviceGetComputeRunningProcesses_v2", &api->processes);
  }
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

unsigned Nvml::MaxSmClockMhz(const std::string& uuid) const {
  if (!available_ || api_->max_clock == nullptr) return 0;
  nvmlDevice_t dev = nullptr;
  unsigned int v = 0;
  if (api_->by_uuid(uuid.c_str(), &dev) != NVML_SUCCESS) return 0;
  return api_->max_clock(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS ? v : 0;
}

int Nvml::OtherComputeProcesses(const std::string& uuid) const {
  if (!available_ || api_->processes == nullptr) return -1;
  nvmlDevice_t dev = nullptr;
  if (api_->by_uuid(uuid.c_str(), &dev) != NVML_SUCCESS) return -1;
  nvmlProcessInfo_t infos[64] = {};
  unsigned int count = 64;
  const nvmlReturn_t r = api_->processes(dev, &count, infos);
  if (r == NVML_ERROR_INSUFFICIENT_SIZE) return static_cast<int>(count);
  if (r != NVML_SUCCESS) return -1;
  // This process's own family does not count: the server and its device hosts (a test
  // binary may hold a server of each isolation at once), and in a device host its sibling
  // hosts (ParentIsTheService).
  const auto self = static_cast<unsigned int>(getpid());
  const auto parent = static_cast<unsigned int>(getppid());
  int others = 0;
  for (unsigned int i = 0; i < count && i < 64; ++i) {
    const unsigned int pid = infos[i].pid;
    if (pid == self || pid == parent) continue;
    const unsigned int pid_parent = ParentOf(pid);
    if (pid_parent == self || (parent_is_service_ && pid_parent == parent)) continue;
    ++others;
  }
  return others;
}

void ThrottleReasonNames(std::uint64_t mask, v1::Clocks* out) {
  for (const auto& [bit, label] : ThrottleReasons()) {
    if ((mask & bit) != 0) out->add_throttle_reason_names(label);
  }
}

}  // namespace kerneleval::server
