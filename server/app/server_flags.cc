#include "server/app/server_flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include <CLI/CLI.hpp>

#include "absl/strings/strip.h"
#include "common/log.h"
#include "server/app/server_credentials.h"
#include "server/evaluation/server_version.h"
#include "server/identity/token_file.h"

namespace kerneleval::server {
namespace {

namespace fs = std::filesystem;

// Flags read in another form than the option they set, converted once parsing ends.
struct RawFlags {
  std::string isolation = "auto";
  std::uint64_t compile_memory_mib = 0;
  double results_max_age_days = 0;
  bool disable_cupti = false;
  std::string token_file;
  std::string metrics_auth_file;
};

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

// The addresses the server listens on, and the name its device metrics carry.
void AddListenFlags(CLI::App& app, ServerOptions& o) {
  app.add_option("--listen", o.listen, "gRPC listen address (port 0 picks a free port)")
      ->capture_default_str();
  app.add_option("--metrics-listen", o.metrics_listen,
                 "Prometheus /metrics address; empty disables. Loopback by default: give "
                 "0.0.0.0:9464 for a Prometheus on another host. Behind the bearer tokens of "
                 "--auth-token-file (and --metrics-basic-auth-file's user) where given")
      ->capture_default_str();
  app.add_option("--health-listen", o.health_listen,
                 "Plaintext gRPC health-only address for probes when --listen has TLS or a "
                 "token; empty disables");
  if (const char* node = std::getenv("NODE_NAME")) o.node_name = node;
  app.add_option("--node-name", o.node_name,
                 "Value of the `node` label of device metrics (default: $NODE_NAME)")
      ->capture_default_str();
}

// Which devices are served, and the suites they are offered.
void AddServedDeviceFlags(CLI::App& app, ServerOptions& o) {
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N[,cuda:M...]")
      ->capture_default_str();
  app.add_option("--cpu-devices", o.cpu_devices,
                 "Serve N CPU devices cpu:0..cpu:N-1 (stand-ins for several devices)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  o.suites_dir = DefaultSuitesDir();
  app.add_option("--suites-dir", o.suites_dir, "Directory of suite JSON files")
      ->capture_default_str();
}

// How much one request, one owner and each device's queue may ask, and the drain on SIGTERM.
void AddLimitFlags(CLI::App& app, ServerCommandLine& c) {
  ServerOptions& o = c.options;
  app.add_option("--max-message-bytes", o.max_message_bytes,
                 "Largest gRPC message accepted or sent")
      ->check(CLI::Range(1 << 20, 2147483647))
      ->capture_default_str();
  app.add_option("--max-tensor-bytes", o.limits.max_tensor_bytes, "Largest tensor accepted")
      ->capture_default_str();
  app.add_option("--max-batch", o.limits.max_batch, "Largest batch accepted")
      ->capture_default_str();
  app.add_option("--max-repetitions", o.limits.max_repetitions, "Most timed calls per measurement")
      ->capture_default_str();
  app.add_option("--max-benchmark-seconds", o.limits.max_benchmark_seconds,
                 "Wall-clock cap of one benchmark")
      ->capture_default_str();
  o.limits.max_queued_bytes = DefaultMaxQueuedBytes();
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
                 "the caller's identity) may hold the devices in any hour; checked again as "
                 "each job starts, running jobs counted, a job past it gets RESOURCE_EXHAUSTED; "
                 "kept in the results database where there is one, so one budget across the "
                 "servers sharing --results-db and across restarts (0: no budget)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--worker-idle-spin-us", o.worker_idle_spin_us,
                 "Microseconds a device's worker polls its queue after a job before it sleeps, so "
                 "that back-to-back small Runs start without a thread wake-up (default -1: 500 on "
                 "machines with 8 or more cores, 0 below)")
      ->check(CLI::Range(-1, 1000000))
      ->capture_default_str();
  app.add_option("--drain-seconds", c.drain_seconds, "Grace period for accepted work on SIGTERM")
      ->capture_default_str();
}

// Who may call: bearer tokens, TLS, and the password of /metrics.
void AddSecretFlags(CLI::App& app, ServerOptions& o, RawFlags& raw) {
  app.add_option("--auth-token-file", raw.token_file,
                 "File of 'owner:token' lines (or one bare token): the bearer tokens every RPC "
                 "but health must present, and whose each is; re-read when it changes");
  app.add_option("--secrets-poll-seconds", o.secrets_poll_seconds,
                 "How often --auth-token-file and the --tls-* files are checked for new content")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--metrics-basic-auth-file", raw.metrics_auth_file,
                 "File holding 'user:password' that /metrics takes (HTTP basic auth), besides the "
                 "bearer tokens of --auth-token-file");
  app.add_option("--tls-cert", o.tls_cert_file, "PEM server certificate chain (enables TLS)");
  app.add_option("--tls-key", o.tls_key_file, "PEM server private key");
  app.add_option("--tls-client-ca", o.tls_client_ca_file, "PEM CA that client certificates need");
}

// How devices run: telemetry, CUPTI, fault injection, isolation in device hosts, and the
// tenant hosts of submitted kernels.
void AddDeviceRuntimeFlags(CLI::App& app, ServerOptions& o, RawFlags& raw) {
  app.add_option("--telemetry-seconds", o.telemetry_seconds, "GPU telemetry sampling interval")
      ->capture_default_str();
  app.add_flag("--disable-cupti", raw.disable_cupti,
               "Never load CUPTI: CUDA events only, no kernel-only timer and no DRAM counters. "
               "Not needed for graph replay: CUPTI is attached only for measurements that ask "
               "for it and detached (cuptiFinalize) after them");
  app.add_flag("--enable-fault-injection", o.enable_fault_injection,
               "Register test-only implementations that fault on purpose (device recovery tests)");
  app.add_option("--device-isolation", raw.isolation,
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
}

// Whether submissions are served, and where they (and, by default, the results) are kept.
void AddSubmissionsFlags(CLI::App& app, submissions::SubmissionsOptions& sub) {
  sub.compiler.tool_path = DefaultCompileTool();
  if (const char* libraries = std::getenv("LD_LIBRARY_PATH")) sub.compiler.library_path = libraries;
  app.add_flag("--submissions", sub.enabled,
               "Serve kerneleval.v1.Submissions: register submitted kernels (compiled with NVRTC "
               "in kerneleval-compile processes)");
  app.add_option("--data-dir", sub.data_dir,
                 "Keep registered submissions and benchmark results in DIR/results.sqlite3 "
                 "(default: in memory)");
}

// The results store: where, how long runs are kept, and the baseline of regressions.
void AddResultsFlags(CLI::App& app, store::StoreOptions& results, RawFlags& raw) {
  app.add_option("--results-db", results.results_db,
                 "Keep benchmark results in this PostgreSQL database (postgresql://...) that "
                 "several servers may share, instead of SQLite in --data-dir");
  app.add_option("--store-connections", results.connections,
                 "PostgreSQL connections this server may hold at once (--results-db): the "
                 "result writer, retention and Results queries share them")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--results-retention-interval-seconds", results.retention_interval_seconds,
                 "Apply retention every this many seconds; servers sharing a database take "
                 "turns (one applies it at a time)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--results-max-age-days", raw.results_max_age_days,
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
}

// The verdict queue (server/queue/): how many jobs this server runs, and its leases.
void AddQueueFlags(CLI::App& app, QueueOptions& queue) {
  app.add_option("--queue-workers", queue.workers,
                 "Queued Benchmark jobs this server runs at once (-1: one per device; 0: it "
                 "runs none, and still takes Enqueue, Watch, Cancel and List)")
      ->check(CLI::Range(-1, 1024))
      ->capture_default_str();
  app.add_flag("--queue-benchmarks", queue.benchmarks,
               "Benchmark calls become jobs of the verdict queue: any server with a matching idle "
               "device runs them, and the client's stream follows the job from the server it "
               "reached (for a fleet sharing --results-db)");
  app.add_option("--queue-lease-seconds", queue.lease_seconds,
                 "A claimed job's lease, renewed every third of it; a server that stops "
                 "renewing gives the job back to the queue when it runs out")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--queue-poll-seconds", queue.poll_seconds,
                 "How often the queue is read for jobs enqueued through other servers")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  app.add_option("--queue-max-attempts", queue.max_attempts,
                 "Claims of one job before a lease that runs out fails it")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--queue-max-per-owner", queue.max_queued_per_owner,
                 "Queued jobs one owner may have at once (0: no limit)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
}

// Submissions' compiles (the tool, its limits, its jail) and what one owner may register.
void AddCompileFlags(CLI::App& app, submissions::SubmissionsOptions& sub, RawFlags& raw) {
  app.add_option("--compile-tool", sub.compiler.tool_path, "The kerneleval-compile executable")
      ->capture_default_str();
  app.add_option("--cuda-include-dir", sub.compiler.cuda_include_dir,
                 "CUDA toolkit headers for NVRTC (default: the build's toolkit)");
  app.add_option("--compile-timeout-seconds", sub.compiler.wall_seconds,
                 "Wall-clock limit of one compile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--compile-workers", sub.compile_workers,
                 "Compiles run at once, each in a kerneleval-compile process; the waiting ones "
                 "are taken round-robin between owners")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-compiles-per-owner", sub.max_compiles_per_owner,
                 "Compiles one owner may have waiting or running; more get RESOURCE_EXHAUSTED "
                 "before compiling (0: no limit)")
      ->capture_default_str();
  app.add_option("--compile-cpu-seconds", sub.compiler.cpu_seconds, "CPU-time limit of one compile")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  raw.compile_memory_mib = sub.compiler.address_space_bytes >> 20;
  app.add_option("--compile-memory-mib", raw.compile_memory_mib,
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
               "Compile submissions even where the kernel has no seccomp filters (the compile "
               "jail's open ban): files the server can read are then open to a compile "
               "unless Landlock holds; off, such a server refuses every compile with "
               "FAILED_PRECONDITION. A kernel without Landlock needs no flag");
}

// --disable-cupti, and two settings the GPU scripts give in the environment
// (scripts/gpu-run.sh, gpu-overhead.sh), read here and nowhere below.
DeviceSettings DeviceSettingsFrom(bool disable_cupti) {
  DeviceSettings settings;
  settings.disable_cupti = disable_cupti;
  if (const char* ms = std::getenv("KERNELEVAL_CLOCK_SAMPLE_MS")) {
    settings.clock_sample_ms = std::atoi(ms);
  }
  if (const char* us = std::getenv("KERNELEVAL_DEVICE_LINK_SPIN_US")) {
    settings.link_spin_us = std::max(0, std::atoi(us));
  }
  return settings;
}

// The flags read in another form, into the options they set.
void ApplyRawFlags(const RawFlags& raw, ServerCommandLine& c) {
  ServerOptions& o = c.options;
  o.submissions.compiler.address_space_bytes = raw.compile_memory_mib << 20;
  o.results.max_age_seconds = static_cast<std::int64_t>(raw.results_max_age_days * 86400);
  o.device_isolation = raw.isolation == "process"  ? DeviceIsolation::kProcess
                       : raw.isolation == "thread" ? DeviceIsolation::kThread
                                                   : DeviceIsolation::kAuto;
  c.device_settings = DeviceSettingsFrom(raw.disable_cupti);
}

// --auth-token-file's tokens; false (logged) when the file cannot be read or does not parse.
bool ReadTokenFile(const std::string& token_file, ServerOptions& o) {
  absl::StatusOr<std::string> text = ReadSecretFile(token_file, "--auth-token-file");
  if (!text.ok()) {
    LogError(text.status().message());
    return false;
  }
  // Checked here as well as at start, so that an empty file never starts an open server.
  if (absl::Status s = ParseTokenFile(*text).status(); !s.ok()) {
    LogError(s.message());
    return false;
  }
  o.auth_token = *std::move(text);
  o.auth_token_file = token_file;
  return true;
}

// --metrics-basic-auth-file's 'user:password'; false (logged) when it holds none.
bool ReadMetricsAuthFile(const std::string& metrics_auth_file, ServerOptions& o) {
  std::ifstream in(metrics_auth_file);
  std::string line;
  std::getline(in, line);
  o.metrics_basic_auth = std::string(absl::StripAsciiWhitespace(line));
  const std::size_t colon = o.metrics_basic_auth.find(':');
  if (colon == 0 || colon == std::string::npos) {  // never serve /metrics open instead
    LogError("--metrics-basic-auth-file: cannot read 'user:password' from '" + metrics_auth_file +
             "'");
    return false;
  }
  return true;
}

}  // namespace

std::optional<int> ParseServerCommandLine(int argc, char** argv, ServerCommandLine* out) {
  ServerCommandLine& c = *out;
  RawFlags raw;
  // The flags are added in the order --help lists them.
  CLI::App app{"kerneleval-server: fused residual-add + RMSNorm evaluation service"};
  app.set_version_flag("--version", ServerVersion() + " (" + GitRevision() + ")");
  AddListenFlags(app, c.options);
  AddServedDeviceFlags(app, c.options);
  AddLimitFlags(app, c);
  AddSecretFlags(app, c.options, raw);
  AddDeviceRuntimeFlags(app, c.options, raw);
  AddSubmissionsFlags(app, c.options.submissions);
  AddResultsFlags(app, c.options.results, raw);
  AddCompileFlags(app, c.options.submissions, raw);
  AddQueueFlags(app, c.options.queue);
  app.add_option("--port-file", c.port_file,
                 "Write {\"grpc_port\":N,\"metrics_port\":M} here once listening");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  ApplyRawFlags(raw, c);
  if (!raw.token_file.empty() && !ReadTokenFile(raw.token_file, c.options)) return 2;
  if (!raw.metrics_auth_file.empty() && !ReadMetricsAuthFile(raw.metrics_auth_file, c.options)) {
    return 2;
  }
  return std::nullopt;
}

}  // namespace kerneleval::server
