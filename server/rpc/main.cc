// kerneleval-server: flags, signals, and the server's lifetime. Everything else lives in
// the library so that tests run the same server in-process.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "server/device/device_settings.h"
#include "server/evaluation/server_version.h"
#include "server/identity/token_file.h"
#include "server/rpc/server.h"

namespace {

namespace fs = std::filesystem;

// The process's device settings, before any backend is built: --disable-cupti, and two
// settings the GPU scripts give in the environment (scripts/gpu-run.sh, gpu-overhead.sh),
// read here and nowhere below.
void SetDeviceSettings(bool disable_cupti) {
  kerneleval::server::DeviceSettings settings;
  settings.disable_cupti = disable_cupti;
  if (const char* ms = std::getenv("KERNELEVAL_CLOCK_SAMPLE_MS")) {
    settings.clock_sample_ms = std::atoi(ms);
  }
  if (const char* us = std::getenv("KERNELEVAL_DEVICE_LINK_SPIN_US")) {
    settings.link_spin_us = std::max(0, std::atoi(us));
  }
  kerneleval::server::ApplyDeviceSettings(settings);
}

// Installed layout first (bin/../share/kerneleval/suites), then the source tree's suites.
std::string DefaultSuitesDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share/kerneleval/suites";
    if (fs::is_directory(installed, ec)) return installed.string();
  }
#ifdef KERNELEVAL_SOURCE_SUITES_DIR
  if (fs::is_directory(KERNELEVAL_SOURCE_SUITES_DIR, ec)) return KERNELEVAL_SOURCE_SUITES_DIR;
#endif
  return "";
}

// The device host ships next to the server binary.
std::string DefaultDeviceHost() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "kerneleval-device-host" : (exe.parent_path() / "kerneleval-device-host").string();
}

// kerneleval-compile (submissions) ships next to the server binary too.
std::string DefaultCompileTool() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "kerneleval-compile" : (exe.parent_path() / "kerneleval-compile").string();
}

bool WritePortFile(const std::string& path, int grpc_port, int metrics_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "{\"grpc_port\": " << grpc_port << ", \"metrics_port\": " << metrics_port << "}\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  kerneleval::SetLogProgram("kerneleval-server");
  kerneleval::server::ServerOptions o;
  o.suites_dir = DefaultSuitesDir();
  std::string port_file, token_file, metrics_auth_file;
  double drain_seconds = 30;
  std::uint64_t max_tensor_bytes = o.limits.max_tensor_bytes;

  CLI::App app{"kerneleval-server: fused residual-add + RMSNorm evaluation service"};
  app.set_version_flag("--version", kerneleval::server::ServerVersion() + " (" +
                                        kerneleval::server::GitRevision() + ")");
  app.add_option("--listen", o.listen, "gRPC listen address (port 0 picks a free port)")
      ->capture_default_str();
  app.add_option("--metrics-listen", o.metrics_listen,
                 "Prometheus /metrics address; empty disables")
      ->capture_default_str();
  app.add_option("--health-listen", o.health_listen,
                 "Plaintext gRPC health-only address for probes when --listen has TLS or a "
                 "token; empty disables");
  if (const char* node = std::getenv("NODE_NAME")) o.node_name = node;
  app.add_option("--node-name", o.node_name,
                 "Value of the `node` label of device metrics (default: $NODE_NAME)")
      ->capture_default_str();
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N[,cuda:M...]")
      ->capture_default_str();
  app.add_option("--cpu-devices", o.cpu_devices,
                 "Serve N CPU devices cpu:0..cpu:N-1 (stand-ins for several devices)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--suites-dir", o.suites_dir, "Directory of suite JSON files")
      ->capture_default_str();
  app.add_option("--max-message-bytes", o.max_message_bytes,
                 "Largest gRPC message accepted or sent")
      ->check(CLI::Range(1 << 20, 2147483647))
      ->capture_default_str();
  app.add_option("--max-tensor-bytes", max_tensor_bytes, "Largest tensor accepted")
      ->capture_default_str();
  app.add_option("--max-batch", o.limits.max_batch, "Largest batch accepted")
      ->capture_default_str();
  app.add_option("--max-repetitions", o.limits.max_repetitions, "Most timed calls per measurement")
      ->capture_default_str();
  app.add_option("--max-benchmark-seconds", o.limits.max_benchmark_seconds,
                 "Wall-clock cap of one benchmark")
      ->capture_default_str();
  o.limits.max_queued_bytes = kerneleval::server::DefaultMaxQueuedBytes();
  app.add_option("--max-queued-bytes", o.limits.max_queued_bytes,
                 "Bytes of Run requests and outputs held for queued work before new Runs get "
                 "RESOURCE_EXHAUSTED (default: half the cgroup memory limit; 0: no bound)")
      ->capture_default_str();
  app.add_option("--queue-capacity", o.queue_capacity, "Jobs queued per device")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--max-queued-per-owner", o.max_queued_per_owner,
                 "Jobs one owner may have waiting on all devices together before its next gets "
                 "RESOURCE_EXHAUSTED (-1: --queue-capacity; 0: no limit); devices take jobs "
                 "round-robin between owners")
      ->check(CLI::Range(-1L, 1000000L))
      ->capture_default_str();
  app.add_option("--owner-device-seconds-per-hour", o.owner_device_seconds_per_hour,
                 "Device-seconds one owner's jobs (built-ins and submissions alike, charged to "
                 "the caller's identity) may hold the devices in any hour before its next job "
                 "gets RESOURCE_EXHAUSTED (0: no budget)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--worker-idle-spin-us", o.worker_idle_spin_us,
                 "Microseconds a device's worker polls its queue after a job before it sleeps, so "
                 "that back-to-back small Runs start without a thread wake-up (default -1: 500 on "
                 "machines with 8 or more cores, 0 below)")
      ->check(CLI::Range(-1, 1000000))
      ->capture_default_str();
  app.add_option("--drain-seconds", drain_seconds, "Grace period for accepted work on SIGTERM")
      ->capture_default_str();
  app.add_option("--auth-token-file", token_file,
                 "File of 'owner:token' lines (or one bare token): the bearer tokens every RPC "
                 "but health must present, and whose each is; re-read when it changes");
  app.add_option("--secrets-poll-seconds", o.secrets_poll_seconds,
                 "How often --auth-token-file and the --tls-* files are checked for new content")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--metrics-basic-auth-file", metrics_auth_file,
                 "File holding 'user:password' that /metrics asks for (HTTP basic auth)");
  app.add_option("--tls-cert", o.tls_cert_file, "PEM server certificate chain (enables TLS)");
  app.add_option("--tls-key", o.tls_key_file, "PEM server private key");
  app.add_option("--tls-client-ca", o.tls_client_ca_file, "PEM CA that client certificates need");
  app.add_option("--telemetry-seconds", o.telemetry_seconds, "GPU telemetry sampling interval")
      ->capture_default_str();
  bool disable_cupti = false;
  app.add_flag("--disable-cupti", disable_cupti,
               "Never load CUPTI: CUDA events only, no kernel-only timer and no DRAM counters. "
               "Not needed for graph replay: CUPTI is attached only for measurements that ask "
               "for it and detached (cuptiFinalize) after them");
  app.add_flag("--enable-fault-injection", o.enable_fault_injection,
               "Register test-only implementations that fault on purpose (device recovery tests)");
  std::string isolation = "auto";
  app.add_option("--device-isolation", isolation,
                 "process: each device in a kerneleval-device-host child, replaced after a fault "
                 "(a sticky CUDA fault cannot be repaired in-process); thread: in this process; "
                 "auto: process for GPUs, thread for CPUs")
      ->check(CLI::IsMember({"auto", "process", "thread"}))
      ->capture_default_str();
  o.device_host_path = DefaultDeviceHost();
  app.add_option("--device-host", o.device_host_path, "The kerneleval-device-host executable")
      ->capture_default_str();
  app.add_option("--device-call-timeout-seconds", o.device_call_timeout_seconds,
                 "A device host call unanswered this long counts as a hung device; the host is "
                 "replaced (process isolation)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-tenant-hosts-per-gpu", o.tenant_hosts.max_hosts,
                 "Submission hosts per GPU (one per owner; the least recently used idle one "
                 "is stopped to start another)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tenant-host-idle-seconds", o.tenant_hosts.idle_seconds,
                 "An owner's submission host unused this long is stopped")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto& sub = o.submissions;
  sub.compiler.tool_path = DefaultCompileTool();
  if (const char* libraries = std::getenv("LD_LIBRARY_PATH")) sub.compiler.library_path = libraries;
  app.add_flag("--submissions", sub.enabled,
               "Serve kerneleval.v1.Submissions: register submitted kernels (compiled with NVRTC "
               "in kerneleval-compile processes)");
  app.add_option("--data-dir", sub.data_dir,
                 "Keep registered submissions under DIR/submissions and benchmark results in "
                 "DIR/results.sqlite3 (default: in memory)");
  auto& results = o.results;
  app.add_option("--results-db", results.results_db,
                 "Keep benchmark results in this PostgreSQL database (postgresql://...) that "
                 "several servers may share, instead of SQLite in --data-dir");
  double results_max_age_days = 0;
  app.add_option("--results-max-age-days", results_max_age_days,
                 "Delete stored runs older than this (0: keep)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--results-max-runs", results.max_runs,
                 "Keep at most this many stored runs, the newest (0: no bound)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--results-raw-sample-runs", results.raw_sample_runs,
                 "Runs beyond the newest N keep 21 quantiles instead of their raw samples (0: "
                 "keep every sample)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--results-baseline", results.baseline_results,
                 "Regression detection: previous passing results a new one is compared against")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--compile-tool", sub.compiler.tool_path, "The kerneleval-compile executable")
      ->capture_default_str();
  app.add_option("--cuda-include-dir", sub.compiler.cuda_include_dir,
                 "CUDA toolkit headers for NVRTC (default: the build's toolkit)");
  app.add_option("--compile-timeout-seconds", sub.compiler.wall_seconds,
                 "Wall-clock limit of one compile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-compiles-per-owner", sub.max_compiles_per_owner,
                 "Compiles one owner may have waiting or running; more get RESOURCE_EXHAUSTED "
                 "before compiling (0: no limit)")
      ->capture_default_str();
  app.add_option("--compile-cpu-seconds", sub.compiler.cpu_seconds, "CPU-time limit of one compile")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  std::uint64_t compile_memory_mib = sub.compiler.address_space_bytes >> 20;
  app.add_option("--compile-memory-mib", compile_memory_mib,
                 "Address-space limit of one compile, MiB")
      ->check(CLI::Range(256, 1 << 20))
      ->capture_default_str();
  app.add_option("--submission-max-source-bytes", sub.max_source_bytes, "Largest submission source")
      ->check(CLI::Range(1, 4 << 20))
      ->capture_default_str();
  app.add_option("--max-submissions-per-owner", sub.max_per_owner, "Submissions one owner may hold")
      ->capture_default_str();
  app.add_option("--max-submissions", sub.max_total, "Submissions the server holds in all")
      ->capture_default_str();
  auto& module_limits = sub.compiler.module_limits;
  app.add_option("--max-submission-cubin-bytes", module_limits.max_cubin_bytes,
                 "Largest compiled submission (cubin) registered; a larger one is refused "
                 "before any GPU loads it")
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-submission-static-bytes", module_limits.max_static_bytes,
                 "Most device memory a submission's __device__ / __constant__ variables may "
                 "take at load (read from the cubin at registration)")
      ->capture_default_str();
  app.add_flag("--allow-unconfined-compile", sub.compiler.allow_unconfined,
               "Compile submissions even where the kernel lacks Landlock or seccomp (the "
               "compile jail): for kernels without Landlock only; off, such a server refuses "
               "every compile with FAILED_PRECONDITION");
  app.add_option("--port-file", port_file,
                 "Write {\"grpc_port\":N,\"metrics_port\":M} here once listening");
  CLI11_PARSE(app, argc, argv);
  sub.compiler.address_space_bytes = compile_memory_mib << 20;
  results.max_age_seconds = static_cast<std::int64_t>(results_max_age_days * 86400);
  o.limits.max_tensor_bytes = max_tensor_bytes;
  o.device_isolation = isolation == "process"  ? kerneleval::server::DeviceIsolation::kProcess
                       : isolation == "thread" ? kerneleval::server::DeviceIsolation::kThread
                                               : kerneleval::server::DeviceIsolation::kAuto;
  SetDeviceSettings(disable_cupti);

  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) {
      kerneleval::LogError("--auth-token-file: cannot read '" + token_file + "'");
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    // Checked here as well as at start, so that an empty file never starts an open server.
    if (absl::Status s = kerneleval::server::ParseTokenFile(text.str()).status(); !s.ok()) {
      kerneleval::LogError(s.message());
      return 2;
    }
    o.auth_token = text.str();
    o.auth_token_file = token_file;
  }

  if (!metrics_auth_file.empty()) {
    std::ifstream in(metrics_auth_file);
    std::string line;
    std::getline(in, line);
    o.metrics_basic_auth = std::string(absl::StripAsciiWhitespace(line));
    const std::size_t colon = o.metrics_basic_auth.find(':');
    if (colon == 0 || colon == std::string::npos) {  // never serve /metrics open instead
      kerneleval::LogError("--metrics-basic-auth-file: cannot read 'user:password' from '" +
                           metrics_auth_file + "'");
      return 2;
    }
  }

  // Signals are taken by sigwait below, so every thread starts with them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = kerneleval::server::KernelEvalServer::Start(o);
  if (!server.ok()) {
    kerneleval::LogError(server.status().message());
    return 1;
  }
  kerneleval::LogInfo(absl::StrCat("version ", kerneleval::server::ServerVersion(),
                                   " listening on port ", (*server)->grpc_port(),
                                   ", metrics on port ", (*server)->metrics_port()));
  if (!port_file.empty() &&
      !WritePortFile(port_file, (*server)->grpc_port(), (*server)->metrics_port())) {
    kerneleval::LogError("--port-file: cannot write '" + port_file + "'");
    return 1;
  }

  int sig = 0;
  sigwait(&signals, &sig);
  kerneleval::LogInfo(absl::StrCat("signal ", sig, ", draining for up to ", drain_seconds, " s"));
  (*server)->Shutdown(absl::Seconds(drain_seconds));
  kerneleval::LogInfo("stopped");
  return 0;
}
