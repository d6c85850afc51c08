#include "server/app/server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/submission_id.h"
#include "common/suites.h"
#include "server/app/data_dir_lock.h"
#include "server/app/device_factory.h"
#include "server/app/metrics_gate.h"
#include "server/app/server_credentials.h"
#include "server/app/shared_owner_usage.h"
#include "server/device/owner_job_limit.h"
#include "server/device/tenant_backend.h"
#include "server/evaluation/server_version.h"
#include "server/identity/auth.h"
#include "server/identity/caller_identity.h"
#include "server/oip/oip_service.h"
#include "server/queue/queue_service.h"
#include "server/queue/queued_benchmark.h"
#include "server/rpc/kerneleval_service.h"
#include "server/rpc/results_service.h"
#include "server/rpc/unserved_methods.h"
#include "server/store/submission_table.h"
#include "server/submissions/compile_jail.h"

namespace kerneleval::server {
namespace {

constexpr char kReadiness[] = "readiness";
constexpr char kService[] = "kerneleval.v1.KernelEval";
constexpr char kResultsService[] = "kerneleval.v1.Results";

// The Results service's own health: NOT_SERVING while the results database is waited for,
// so that a probe names what waits; readiness stays with the devices, as Run and Benchmark
// serve meanwhile. Told by the store's connecting thread, which may outlive the gRPC servers:
// their health services are attached once serving and detached before they go.
class StoreHealth {
 public:
  void Set(bool connected) {
    std::lock_guard<std::mutex> lock(mu_);
    connected_ = connected;
    for (auto* h : health_) h->SetServingStatus(kResultsService, connected);
  }
  void Attach(std::vector<grpc::HealthCheckServiceInterface*> health) {
    std::lock_guard<std::mutex> lock(mu_);
    health_ = std::move(health);
    for (auto* h : health_) h->SetServingStatus(kResultsService, connected_);
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    health_.clear();
  }

 private:
  std::mutex mu_;
  bool connected_ = true;
  std::vector<grpc::HealthCheckServiceInterface*> health_;
};

}  // namespace

struct KernelEvalServer::Impl {
  // First: released last, after the store and the submissions have closed their files.
  std::vector<DataDirLock> data_dir_locks;
  ServerOptions options;
  // Who each call is (caller_identity.h), for every service; shared with the token check.
  // Its tokens are replaced when --auth-token-file changes (SecretsLoop).
  std::shared_ptr<Identities> identities;
  Metrics metrics;
  DeviceSet devices;
  // Shared by every device worker; reads and writes the store's database once it opens.
  std::shared_ptr<OwnerJobLimit> owner_limit;
  ServiceState state;
  StoreHealth store_health;  // before the store: its thread may tell it until the store closes
  // Before the services: destroyed after them, writing what they queued last.
  std::unique_ptr<store::ResultStore> results;
  std::unique_ptr<ResultsService> results_service;
  std::unique_ptr<store::JobQueue> job_queue;
  std::unique_ptr<QueueRunner> queue_runner;  // stopped first in Shutdown
  std::unique_ptr<QueueService> queue_service;
  std::unique_ptr<KernelEvalService> service;
  std::unique_ptr<oip::OipService> oip;  // the Open Inference Protocol front
  UnservedMethods unserved;  // every other method: UNIMPLEMENTED with what to use instead
  // Outlives grpc_server: its compile workers answer RPCs until they are joined.
  std::unique_ptr<submissions::SubmissionsService> submissions;
  std::unique_ptr<grpc::Server> grpc_server;
  std::unique_ptr<grpc::Server> health_server;      // --health-listen: plaintext, health only
  std::shared_ptr<const MetricsGate> metrics_gate;  // outlives the exposer, declared first
  std::unique_ptr<prometheus::Exposer> exposer;
  int grpc_port = 0;

  std::mutex mu;
  std::condition_variable cv;
  std::size_t warm_pending = 0;
  // Each device's standing, by name: serving (warmed up and not recovering), given up on.
  struct DeviceHealth {
    bool serving = false;
    bool gave_up = false;
  };
  std::map<std::string, DeviceHealth> device_health;
  bool shut_down = false;
  std::thread telemetry;
  std::thread secrets;  // re-reads --auth-token-file (SecretsLoop)

  ~Impl() {
    store_health.Detach();
    if (owner_limit != nullptr) owner_limit->set_shared_usage({});  // before the store closes
  }

  // Both servers answer health with the same statuses.
  void SetServing(const std::string& service, bool serving) {
    for (grpc::Server* server : {grpc_server.get(), health_server.get()}) {
      if (server != nullptr) server->GetHealthCheckService()->SetServingStatus(service, serving);
    }
  }

  void SetReady(bool ready) {
    state.ready.store(ready);
    metrics.SetReady(ready);
    SetServing(kReadiness, ready);
    SetServing(kService, ready);
    SetServing("inference.GRPCInferenceService", ready);
  }

  // Health from the devices' standing: each device's own service; readiness while at least
  // one serves, so that one bad GPU takes out only itself; liveness (the whole-server
  // status) fails only once every device has been given up on, when a restart of the pod is
  // the one remedy left.
  void RefreshHealthLocked() {
    if (shut_down) return;  // Shutdown has turned everything NOT_SERVING
    bool any_serving = false;
    bool all_gave_up = !device_health.empty();
    for (const auto& [name, h] : device_health) {
      SetServing(absl::StrCat(kService, "/", name), h.serving);
      any_serving = any_serving || h.serving;
      all_gave_up = all_gave_up && h.gave_up;
    }
    if (any_serving) state.warmed.store(true);  // admission; each device is then checked
    SetReady(any_serving);
    SetServing("", !all_gave_up);
    if (oip != nullptr) oip->SetLive(!all_gave_up);  // ServerLive agrees
  }

  void OnWarm(DeviceWorker* worker, const absl::Status& status) {
    v1::Device d = worker->backend().Describe();
    d.set_queue_capacity(static_cast<std::uint32_t>(worker->capacity()));
    d.set_healthy(status.ok());
    metrics.SetDevice(d);
    metrics.AddBuiltinImplementations(worker->backend().Implementations());
    if (!status.ok()) {
      LogError(absl::StrCat(worker->name(), " did not warm up (", status.ToString(),
                            "); the other devices serve without it"));
    }
    std::lock_guard<std::mutex> lock(mu);
    device_health[worker->name()].serving = worker->serving();
    --warm_pending;
    RefreshHealthLocked();
    cv.notify_all();
  }

  // A device fault takes that device out of service until it is rebuilt; the server stays
  // ready while another device serves.
  void OnHealth(const std::string& device, bool healthy) {
    metrics.SetDeviceHealthy(device, healthy);
    // The worker reports healthy only after a rebuild.
    if (healthy) {
      metrics.DeviceRestarted(device);
      metrics.SetDeviceGivenUp(device, false);
    }
    std::lock_guard<std::mutex> lock(mu);
    DeviceHealth& h = device_health[device];
    h.serving = healthy;
    if (healthy) h.gave_up = false;
    RefreshHealthLocked();
    cv.notify_all();
  }

  // The device's recovery gave up (DeviceWorker::RecoverDevice).
  void OnGaveUp(const std::string& device) {
    metrics.SetDeviceHealthy(device, false);
    // Where on-call sees it: KernelevalDeviceGivenUp (deploy/prometheus/rules/alerts.yml).
    metrics.SetDeviceGivenUp(device, true);
    std::lock_guard<std::mutex> lock(mu);
    DeviceHealth& h = device_health[device];
    h.serving = false;
    h.gave_up = true;
    RefreshHealthLocked();
  }

  // Polls --auth-token-file's content (not its inode or mtime: a Kubernetes Secret volume
  // swaps a symlink to a new directory) and replaces the tokens when it changed and parses.
  void SecretsLoop() {
    std::string last = options.auth_token;
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::duration<double>(options.secrets_poll_seconds),
                        [this] { return shut_down; })) {
      lock.unlock();
      ReloadTokenFile(options.auth_token_file, &last, identities.get());
      lock.lock();
    }
  }

  // Samples clocks, power and memory of every device that has them.
  void TelemetryLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!shut_down) {
      lock.unlock();
      for (const auto& w : devices.workers()) {
        bool available = false;
        const v1::Clocks c = const_cast<Backend&>(w->backend()).ReadClocks(&available);
        if (available) metrics.SetClocks(w->name(), c);
        metrics.SetDeviceHealthy(w->name(), w->serving());
      }
      metrics.ExpireSeries();
      lock.lock();
      cv.wait_for(lock, std::chrono::duration<double>(options.telemetry_seconds),
                  [this] { return shut_down; });
    }
  }
};

KernelEvalServer::KernelEvalServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KernelEvalServer::~KernelEvalServer() { Shutdown(absl::Seconds(5)); }

namespace {

using Impl = KernelEvalServer::Impl;

// Before anything opens a file there: one server per data directory.
absl::Status LockDataDirs(Impl* s) {
  const ServerOptions& options = s->options;
  std::vector<std::string> data_dirs;
  for (const std::string& dir : {options.submissions.data_dir, options.results.data_dir}) {
    if (!dir.empty() && std::find(data_dirs.begin(), data_dirs.end(), dir) == data_dirs.end()) {
      data_dirs.push_back(dir);
    }
  }
  for (const std::string& dir : data_dirs) {
    absl::StatusOr<DataDirLock> lock = DataDirLock::Acquire(dir);
    if (!lock.ok()) return lock.status();
    s->data_dir_locks.push_back(std::move(*lock));
  }
  return absl::OkStatus();
}

// The backends a test gave, or else those --device names; at least one.
absl::StatusOr<std::vector<std::unique_ptr<Backend>>> ServedBackends(
    const ServerOptions& options, std::vector<std::unique_ptr<Backend>> backends) {
  if (backends.empty()) {
    BackendOptions backend_options;
    backend_options.fault_injection = options.enable_fault_injection;
    backend_options.isolation = options.device_isolation;
    backend_options.device_host_path = options.device_host_path;
    backend_options.device_call_timeout_seconds = options.device_call_timeout_seconds;
    backend_options.tenant_hosts = options.tenant_hosts;
    auto created = CreateBackends(options.device, options.cpu_devices, backend_options);
    if (!created.ok()) return created.status();
    backends = std::move(*created);
  }
  if (backends.empty()) return absl::InvalidArgumentError("--device: no device to serve");
  return backends;
}

// The suites, who callers are (the token file's owners), and the credentials of --listen:
// every mistake in them reported before a device starts or a port opens.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadSuitesAndSecrets(Impl* s) {
  const ServerOptions& options = s->options;
  if (!options.suites_dir.empty()) {
    auto suites = LoadSuiteDirectory(options.suites_dir);
    if (!suites.ok()) return suites.status();
    s->state.suites = std::move(*suites);
  }
  std::vector<OwnerToken> tokens;
  if (!options.auth_token.empty()) {
    absl::StatusOr<std::vector<OwnerToken>> parsed = ParseTokenFile(options.auth_token);
    if (!parsed.ok()) return parsed.status();
    tokens = std::move(*parsed);
  }
  s->identities = std::make_shared<Identities>(std::move(tokens));
  auto creds = ListenCredentials(options, s->identities, &s->metrics);
  if (!creds.ok()) return creds.status();
  if (!options.metrics_basic_auth.empty()) {
    const std::size_t colon = options.metrics_basic_auth.find(':');
    if (colon == 0 || colon == std::string::npos) {
      return absl::InvalidArgumentError(
          "--metrics-basic-auth-file: expected one line 'user:password'");
    }
  }
  return creds;
}

// One worker per backend, all sharing the owners' limits, each reporting its queue depth and
// its health to the server; the shared state the services read.
void BuildDevices(Impl* s, std::vector<std::unique_ptr<Backend>> backends) {
  const ServerOptions& options = s->options;
  s->state.devices = &s->devices;
  s->metrics.SetNodeName(options.node_name);
  s->state.metrics = &s->metrics;
  s->state.limits = options.limits;
  s->state.host_preparation = options.benchmark_host_preparation;
  const std::chrono::microseconds idle_spin =
      options.worker_idle_spin_us >= 0 ? std::chrono::microseconds(options.worker_idle_spin_us)
                                       : DefaultWorkerIdleSpin();
  const std::size_t per_owner = options.max_queued_per_owner < 0
                                    ? options.queue_capacity
                                    : static_cast<std::size_t>(options.max_queued_per_owner);
  s->owner_limit = std::make_shared<OwnerJobLimit>(
      per_owner, OwnerDeviceBudget{options.owner_device_seconds_per_hour, 3600});
  for (auto& b : backends) {
    const std::string name = b->name();
    Metrics* metrics = &s->metrics;
    s->device_health[name] = {};
    s->devices.Add(std::make_unique<DeviceWorker>(
        std::move(b), options.queue_capacity,
        [metrics, name](std::size_t depth) { metrics->SetQueueDepth(name, depth); },
        [s, name](bool healthy) { s->OnHealth(name, healthy); }, [s, name] { s->OnGaveUp(name); }));
    s->devices.workers().back()->set_idle_spin(idle_spin);
    s->devices.workers().back()->set_owner_limit(s->owner_limit);
  }
  s->metrics.SetBuildInfo(ServerVersion(), GitRevision(),
                          s->devices.workers().front()->backend().RuntimeVersion());
  s->metrics.SetReady(false);
}

// --metrics-listen: Prometheus /metrics, behind the bearer tokens of --auth-token-file and
// the user of --metrics-basic-auth-file where either is given (metrics_gate.h).
absl::Status StartMetricsExposer(Impl* s) {
  const ServerOptions& options = s->options;
  if (options.metrics_listen.empty()) return absl::OkStatus();
  s->metrics_gate = std::make_shared<MetricsGate>(options.metrics_basic_auth, s->identities);
  try {
    s->exposer = GatedExposer(options.metrics_listen, s->metrics_gate);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen: cannot listen on ",
                                               options.metrics_listen, ": ", e.what()));
  }
  s->exposer->RegisterCollectable(s->metrics.registry());
  s->exposer->RegisterCollectable(s->metrics.process_collectable());
  return absl::OkStatus();
}

// The --listen port and its message limits, with the KernelEval and OIP services and the
// answer to every other method.
void AddCoreServices(Impl* s, const std::shared_ptr<grpc::ServerCredentials>& creds,
                     grpc::ServerBuilder& builder) {
  const ServerOptions& options = s->options;
  s->service = std::make_unique<KernelEvalService>(&s->state);
  // gRPC sets SO_REUSEPORT by default: a second server on a port in use would start and
  // silently take half of the connections. Off, its bind fails and it exits.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, creds, &s->grpc_port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.RegisterService(s->service.get());
  s->oip = std::make_unique<oip::OipService>(&s->state);
  builder.RegisterService(s->oip.get());
  builder.RegisterCallbackGenericService(&s->unserved);
}

// The results store (SQLite in the data directory, PostgreSQL, or memory) and its service.
absl::Status AddResultsService(Impl* s, grpc::ServerBuilder& builder) {
  const ServerOptions& options = s->options;
  store::StoreOptions store_options = options.results;
  if (store_options.data_dir.empty()) store_options.data_dir = options.submissions.data_dir;
  if (store_options.server_name.empty()) store_options.server_name = options.node_name;
  store_options.server_version = ServerVersion();
  store_options.git_revision = GitRevision();
  store_options.on_connection = [s](bool connected, const std::string& waiting_for) {
    s->store_health.Set(connected);
    if (!connected)
      LogWarning(
          absl::StrCat("results store: waiting for the database (Run and "
                       "Benchmark serve meanwhile): ",
                       waiting_for));
  };
  for (const v1::SuiteDefinition& suite : s->state.suites) {
    store_options.official_suite_hashes[suite.name()] = store::SuiteHash(suite);
  }
  auto opened = store::ResultStore::Open(store_options, s->metrics.registry());
  if (!opened.ok()) return opened.status();
  s->results = std::move(*opened);
  s->state.results = s->results.get();
  s->results_service = std::make_unique<ResultsService>(&s->state);
  builder.RegisterService(s->results_service.get());
  // Owners' device budgets: one across the servers sharing this database, and kept across
  // restarts, wherever the store keeps a database (not the in-memory one of a server without
  // --data-dir or --results-db).
  const bool kept = !store_options.data_dir.empty() || !store_options.results_db.empty();
  if (options.owner_device_seconds_per_hour > 0 && kept && s->results->database() != nullptr) {
    s->owner_limit->set_shared_usage(SharedOwnerUsageIn(*s->results));
  }
  // The verdict queue lives in the same database: one server alone, or a fleet sharing it.
  QueueOptions queue_options = options.queue;
  if (queue_options.worker_name.empty()) {
    queue_options.worker_name = QueueWorkerName(store_options.server_name);
  }
  queue_options.node_name = options.node_name;
  s->job_queue = std::make_unique<store::JobQueue>(s->results->database());
  s->queue_runner = std::make_unique<QueueRunner>(s->state, *s->job_queue, queue_options,
                                                  s->metrics.registry().get());
  s->queue_service =
      std::make_unique<QueueService>(&s->state, s->job_queue.get(), s->queue_runner.get());
  builder.RegisterService(s->queue_service.get());
  if (queue_options.benchmarks) {
    s->state.benchmark_through_queue = [s](const Caller& caller, v1::BenchmarkRequest request,
                                           BenchmarkCallbacks callbacks) {
      return StartQueuedBenchmark(s->queue_service.get(), s->results.get(), caller,
                                  std::move(request), std::move(callbacks));
    };
  }
  return absl::OkStatus();
}

// The Submissions service (registered always; it refuses calls unless enabled), and, when
// enabled, submissions as implementations of Run and Benchmark.
absl::Status AddSubmissionsService(Impl* s, grpc::ServerBuilder& builder) {
  submissions::SubmissionsOptions submission_options = s->options.submissions;
  submission_options.identities = s->identities.get();
  const store::StoreOptions& kept = s->options.results;
  if (!kept.results_db.empty() || !kept.data_dir.empty() ||
      !s->options.submissions.data_dir.empty()) {
    // Submissions in the results database: for a fleet the one its servers share, so that
    // any server resolves what its caller registered through another and a delete holds on
    // all of them; for one server with --data-dir its SQLite file, beside its results.
    const store::ResultStore* results = s->results.get();
    submission_options.shared =
        store::OpenSubmissionTable(results->database(), [results] { return results->Usable(); });
  }
  // A deleted submission leaves every GPU: its owner's tenant hosts unload it.
  submission_options.on_deleted = [s](const std::string& owner, const std::string& id) {
    for (const auto& w : s->devices.workers()) {
      // The worker hands out its backend as const; the unload is thread-safe.
      auto* tenants = dynamic_cast<TenantBackend*>(const_cast<Backend*>(&w->backend()));
      if (tenants != nullptr) tenants->UnloadSubmission(owner, id);
    }
  };
  auto created = submissions::SubmissionsService::Create(submission_options, [s] {
    std::vector<v1::Device> described;
    for (const auto& w : s->devices.workers()) described.push_back(w->backend().Describe());
    return described;
  });
  if (!created.ok()) return created.status();
  s->submissions = std::move(*created);
  if (submission_options.enabled) {
    // The compile tool runs on this kernel: what it offers is what every compile gets.
    const submissions::CompileJailLayers layers = submissions::ProbeCompileJailLayers();
    if (layers.seccomp) {
      LogInfo(layers.Describe());
    } else {
      LogWarning(layers.Describe());
    }
    s->metrics.SetCompileJailLayers(layers.Named());
  }
  builder.RegisterService(s->submissions.get());
  // Run and Benchmark name submissions as implementations (server/core/admission.h).
  const submissions::SubmissionsService* registered = s->submissions.get();
  if (submission_options.enabled) {
    s->state.find_submission =
        [registered, unload = submission_options.on_deleted](
            const std::string& owner,
            const std::string& id_or_name) -> absl::StatusOr<SubmittedKernel> {
      absl::StatusOr<submissions::ResolvedSubmission> r = registered->Resolve(owner, id_or_name);
      if (!r.ok()) {
        // Deleted through another server sharing the database: a module this server loaded
        // for that id leaves its devices before the owner's next job.
        if (absl::IsNotFound(r.status()) && unload && IsSubmissionId(id_or_name)) {
          unload(owner, id_or_name);
        }
        return r.status();
      }
      return SubmittedKernel{std::move(r->submission), std::move(r->cubin)};
    };
  }
  s->state.identities = s->identities.get();
  return absl::OkStatus();
}

// The --listen server and the --health-listen server.
absl::Status StartGrpcServers(Impl* s, grpc::ServerBuilder& builder) {
  const ServerOptions& options = s->options;
  s->grpc_server = builder.BuildAndStart();
  if (s->grpc_server == nullptr || s->grpc_port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", options.listen,
                                               ": the port is in use, or not an address of "
                                               "this host"));
  }
  if (options.health_listen.empty()) {
    s->store_health.Attach({s->grpc_server->GetHealthCheckService()});
    return absl::OkStatus();
  }
  // Plaintext and without a token, serving health (and reflection, which the global plugin
  // adds) but not KernelEval: the kubelet's gRPC probes speak neither TLS nor tokens.
  grpc::ServerBuilder health;
  health.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int health_port = 0;
  health.AddListeningPort(options.health_listen, grpc::InsecureServerCredentials(), &health_port);
  s->health_server = health.BuildAndStart();
  if (s->health_server == nullptr || health_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health-listen: cannot listen on ", options.health_listen,
                     ": the port is in use, or not an address of this host"));
  }
  s->store_health.Attach(
      {s->grpc_server->GetHealthCheckService(), s->health_server->GetHealthCheckService()});
  return absl::OkStatus();
}

// Every device NOT_SERVING until its warm-up ends, then the warm-ups, telemetry, and the
// token file's watch.
void StartDevicesAndLoops(Impl* s) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->RefreshHealthLocked();
  }
  s->warm_pending = s->devices.workers().size();
  for (const auto& w : s->devices.workers()) {
    DeviceWorker* worker = w.get();
    worker->Start([s, worker](const absl::Status& status) { s->OnWarm(worker, status); });
  }
  s->telemetry = std::thread([s] { s->TelemetryLoop(); });
  if (!s->options.auth_token_file.empty()) s->secrets = std::thread([s] { s->SecretsLoop(); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelEvalServer>> KernelEvalServer::Start(
    const ServerOptions& options, std::vector<std::unique_ptr<Backend>> backends) {
  // Protobuf's complaints about a client's bytes (invalid UTF-8) are client faults, not
  // ERROR lines a client could produce at will; wherever the server runs, main or a test.
  RouteProtobufLogs();
  auto impl = std::make_unique<Impl>();
  Impl* s = impl.get();
  s->options = options;
  if (absl::Status locked = LockDataDirs(s); !locked.ok()) return locked;
  auto served = ServedBackends(options, std::move(backends));
  if (!served.ok()) return served.status();
  auto creds = LoadSuitesAndSecrets(s);
  if (!creds.ok()) return creds.status();
  BuildDevices(s, std::move(*served));
  if (absl::Status exposed = StartMetricsExposer(s); !exposed.ok()) return exposed;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  AddCoreServices(s, *creds, builder);
  if (absl::Status added = AddResultsService(s, builder); !added.ok()) return added;
  if (absl::Status added = AddSubmissionsService(s, builder); !added.ok()) return added;
  if (absl::Status started = StartGrpcServers(s, builder); !started.ok()) return started;
  StartDevicesAndLoops(s);
  return std::unique_ptr<KernelEvalServer>(new KernelEvalServer(std::move(impl)));
}

int KernelEvalServer::grpc_port() const { return impl_->grpc_port; }

int KernelEvalServer::metrics_port() const {
  if (impl_->exposer == nullptr) return 0;
  const std::vector<int> ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

bool KernelEvalServer::WaitUntilReady(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->cv.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] {
    return (impl_->warm_pending == 0 && impl_->state.ready.load()) || impl_->shut_down;
  }) && impl_->state.ready.load();
}

void KernelEvalServer::Shutdown(absl::Duration grace) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
    impl_->store_health.Detach();
    impl_->SetReady(false);
    impl_->state.draining.store(true);
  }
  impl_->cv.notify_all();
  // Queued jobs this server runs go back to the queue at once, for another server to run.
  if (impl_->queue_runner != nullptr) impl_->queue_runner->Stop();
  // Waits for RPCs in flight up to the grace period, then cancels what is left; queued
  // jobs still run (cancelled benchmarks stop between samples) and answer their RPCs.
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(grace));
  for (const auto& w : impl_->devices.workers()) w->Stop();
  impl_->grpc_server->Wait();
  if (impl_->health_server != nullptr) impl_->health_server->Shutdown();
  if (impl_->telemetry.joinable()) impl_->telemetry.join();
  if (impl_->secrets.joinable()) impl_->secrets.join();
}

}  // namespace kerneleval::server
