// What a kerneleval server is started with (flags and tests fill it; server.h starts it).
// Apart from server.h so that the pieces assembled from it (server_credentials.h) need not
// include the server that includes them.
#pragma once

#include <cstddef>
#include <string>

#include "server/app/device_factory.h"
#include "server/core/request_validation.h"
#include "server/queue/queue_runner.h"
#include "server/store/result_store.h"
#include "server/submissions/submissions_service.h"

namespace kerneleval::server {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";
  std::string metrics_listen = "127.0.0.1:9464";  // empty: no metrics endpoint
  // Plaintext gRPC health (no TLS, no token) for probes when --listen has TLS; empty: none.
  std::string health_listen;
  std::string node_name;        // the `node` label of device series (Kubernetes node)
  std::string device = "auto";  // auto | cpu | cuda | cuda:N[,cuda:M...]
  int cpu_devices = 1;          // >1 serves cpu:0..cpu:N-1 (stand-ins for several devices)
  std::string suites_dir;       // empty: no suites
  // 16254 x 2048 bf16 is 66.6 MB per tensor, three of them in a request (200 MB).
  int max_message_bytes = 512 << 20;
  std::size_t queue_capacity = 64;
  // Jobs one owner may have waiting on all devices together, checked before a job is queued
  // (-1: queue_capacity, so that one owner fills at most one device's queue; 0: no limit).
  // Each device then takes its jobs round-robin between owners.
  long max_queued_per_owner = -1;
  // Device-seconds one owner's jobs may hold the devices in any hour, checked when a job is
  // queued and again, counting the owner's running jobs, when a worker takes it
  // (server/device/owner_job_limit.h); 0: no budget.
  double owner_device_seconds_per_hour = 0;
  RequestLimits limits;
  // When a Benchmark prepares workload inputs and references (evaluation/benchmark_plan.h): by the
  // device's kind unless a test or a diagnosis forces one way.
  HostPreparation benchmark_host_preparation = HostPreparation::kAuto;
  // How long an idle device worker polls its queue before it sleeps (0: it sleeps at once).
  // Negative: by the machine, a short spin where there are cores to spare
  // (DefaultWorkerIdleSpin).
  int worker_idle_spin_us = -1;
  // The --auth-token-file's text (server/identity/token_file.h: `owner:token` lines, or one bare
  // token); empty: no authentication.
  std::string auth_token;
  // Where auth_token came from: when set, re-read every secrets_poll_seconds and its tokens
  // replaced when the content changed and parses (a file that does not keeps the old ones).
  std::string auth_token_file;
  // The TLS files are watched too (by gRPC's file watcher): new connections get what they
  // hold now; connections already open keep theirs.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  double secrets_poll_seconds = 5;
  std::string metrics_basic_auth;  // "user:password" that /metrics asks for; empty: open
  double telemetry_seconds = 5;
  // Registers test-only implementations that fault on purpose (CUDA: an illegal address).
  // Refused unless the build allows it (KERNELEVAL_FAULT_INJECTION).
  bool enable_fault_injection = false;
  // Where each device runs: in this process, or in a kerneleval-device-host child that is
  // replaced after a fault (process_backend.h).
  DeviceIsolation device_isolation =
      DeviceIsolation::kAuto;    // the same default as --device-isolation
  std::string device_host_path;  // the kerneleval-device-host executable
  double device_call_timeout_seconds = 300;
  // GPU device hosts of each owner's submitted kernels: how many per GPU, how long kept idle.
  TenantHostOptions tenant_hosts;
  // Submitted kernels (kerneleval.v1.Submissions): off unless `submissions.enabled`.
  submissions::SubmissionsOptions submissions;
  // The results store (kerneleval.v1.Results): SQLite in `results.data_dir` (default: the
  // submissions' --data-dir; neither: in memory), or PostgreSQL with `results.results_db`.
  store::StoreOptions results;
  // The verdict queue this server takes part in (through the results database).
  QueueOptions queue;
};

}  // namespace kerneleval::server
