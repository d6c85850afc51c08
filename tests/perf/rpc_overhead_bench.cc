// RPC overhead of the kerneleval service against a bare gRPC echo of the same bytes.
//
// One process starts (a) the real KernelEvalServer on a CPU backend and (b) an echo server:
// a second implementation of kerneleval.v1.KernelEval whose Run copies hidden_states into
// output and computes nothing, so that both answer the same request bytes with a response
// of the same size through the same protobuf types. Both listen on 127.0.0.1:0 with the
// same message limit, and both are called through the client library with its channel
// settings (max message 1 GiB).
//
//   small: Run, B=1 x H=2048 bf16, MODE_OUTPUT, outputs returned, against the echo of the
//          same request: p50 / p99 wall latency per call and the ratio Run / echo, and the
//          median of each hop of the service's own time split (RunResponse.timing).
//   large: Run, B=16254 x H=2048 bf16 (three tensors in, ~200 MB; one out, ~66 MB) against
//          the echo: (request + response bytes) / median wall time, and Run's rate over the
//          echo's. The CPU backend's compute dominates at this size, so the rate is also
//          given with the server-reported kernel time (the response's latency median; with
//          repetitions=1 and no warm-up the result call is the one timed call) taken out.
//
// (c) A third server answers the echo from a second thread, as the service answers from its
// device's worker; measured against the echo, it is the floor of that design.
//
// Calls alternate between the two servers in blocks so that noise on a shared machine hits
// both alike. --quick runs a few calls at small sizes and checks only that both paths answer
// OK; timings are printed, never asserted.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/time/time.h"
#include "client/kerneleval_client.h"
#include "client/tensors.h"
#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "server/app/server.h"
#include "server/device/cpu_backend.h"
#include "server/device/device_settings.h"

namespace {

namespace v1 = ::kerneleval::v1;
using Clock = std::chrono::steady_clock;

constexpr int kMaxMessageBytes = 512 << 20;  // the server's default

// Run answered by copying hidden_states into output: the bytes of a Run, no work.
void Echo(const v1::RunRequest& request, v1::RunResponse* response) {
  v1::Tensor* out = response->mutable_output();
  out->set_dtype(request.hidden_states().dtype());
  *out->mutable_shape() = request.hidden_states().shape();
  out->set_data(request.hidden_states().data());
}

class EchoService final : public v1::KernelEval::CallbackService {
 public:
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, const v1::RunRequest* request,
                                v1::RunResponse* response) override {
    Echo(*request, response);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// The echo on the service's own method shape: Run registered raw, the request parsed from
// the ByteBuffer and the response serialized into one by hand, as KernelEvalService does.
class RawEchoService final
    : public v1::KernelEval::WithRawCallbackMethod_Run<v1::KernelEval::CallbackService> {
 public:
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::ByteBuffer copy = *request;
    grpc::ProtoBufferReader reader(&copy);
    v1::RunRequest parsed;
    if (!parsed.ParseFromZeroCopyStream(&reader)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "does not parse"));
      return reactor;
    }
    v1::RunResponse answer;
    Echo(parsed, &answer);
    bool own = false;
    (void)grpc::SerializationTraits<google::protobuf::Message>::Serialize(answer, response, &own);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// The same echo answered from a second thread woken by a condition variable, as the service
// answers from its device's worker: what handing a call to another thread and finishing it
// there costs gRPC on its own, with no work done. With a hold, the thread answers that long
// after the call reached the handler (a busy wait standing in for the service's own work):
// what a caller pays for waiting that long, beyond the wait itself.
class HandOffEchoService final : public v1::KernelEval::CallbackService {
 public:
  HandOffEchoService() : thread_([this] { Loop(); }) {}
  ~HandOffEchoService() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void set_hold(std::chrono::nanoseconds hold) { hold_ns_ = hold.count(); }

  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, const v1::RunRequest* request,
                                v1::RunResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const auto until = Clock::now() + std::chrono::nanoseconds(hold_ns_.load());
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back([request, response, reactor, until] {
        while (Clock::now() < until) {
        }
        Echo(*request, response);
        reactor->Finish(grpc::Status::OK);
      });
    }
    cv_.notify_one();
    return reactor;
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::atomic<std::int64_t> hold_ns_{0};
  std::thread thread_;
};

// An echo server on a loopback port with the service's message limit; null if it cannot start.
std::unique_ptr<grpc::Server> StartEcho(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  return *port != 0 ? std::move(server) : nullptr;
}

struct Options {
  bool quick = false;
  int small_iterations = 2000;
  int large_iterations = 12;
  int64_t large_batch = 16254;
  int hidden = 2048;
  std::string device;                // empty: one in-process CPU backend
  std::string isolation = "thread";  // thread | process (--device only)
  std::string device_host;           // kerneleval-device-host, for process isolation
  bool cupti = true;
  int worker_spin_us = -1;  // ServerOptions::worker_idle_spin_us (-1: the machine's default)
};

bool ParseInt(const char* text, int64_t* value) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) return false;
  *value = v;
  return true;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int64_t v = 0;
    auto next = [&](int64_t* out) { return i + 1 < argc && ParseInt(argv[++i], out); };
    if (arg == "--quick") {
      o->quick = true;
      o->small_iterations = 20;
      o->large_iterations = 2;
      o->large_batch = 64;
    } else if (arg == "--small-iterations" && next(&v)) {
      o->small_iterations = static_cast<int>(v);
    } else if (arg == "--large-iterations" && next(&v)) {
      o->large_iterations = static_cast<int>(v);
    } else if (arg == "--large-batch" && next(&v)) {
      o->large_batch = v;
    } else if (arg == "--device" && i + 1 < argc) {
      o->device = argv[++i];
    } else if (arg == "--isolation" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "thread" || std::string(argv[i + 1]) == "process")) {
      o->isolation = argv[++i];
    } else if (arg == "--device-host" && i + 1 < argc) {
      o->device_host = argv[++i];
    } else if (arg == "--worker-spin-us" && next(&v)) {
      o->worker_spin_us = static_cast<int>(v);
    } else if (arg == "--no-worker-spin") {
      o->worker_spin_us = 0;
    } else if (arg == "--disable-cupti") {
      kerneleval::server::DeviceSettings settings = kerneleval::server::CurrentDeviceSettings();
      settings.disable_cupti = true;  // as kerneleval-server --disable-cupti
      kerneleval::server::ApplyDeviceSettings(settings);
      o->cupti = false;
    } else {
      std::fprintf(stderr,
                   "usage: rpc_overhead_bench [--quick] [--small-iterations N] "
                   "[--large-iterations N] [--large-batch B]\n"
                   "                          [--device cuda:0 [--isolation thread|process "
                   "--device-host PATH] [--disable-cupti]]\n"
                   "                          [--worker-spin-us N | --no-worker-spin]\n");
      return false;
    }
  }
  return true;
}

v1::RunRequest MakeRequest(int64_t batch, int hidden) {
  using kerneleval::client::RandomTensor;
  v1::RunRequest r;
  *r.mutable_hidden_states() = RandomTensor(v1::DTYPE_BF16, {batch, hidden}, 1);
  *r.mutable_residual() = RandomTensor(v1::DTYPE_BF16, {batch, hidden}, 2);
  *r.mutable_weight() = RandomTensor(v1::DTYPE_BF16, {hidden}, 3);
  r.set_mode(v1::MODE_OUTPUT);
  r.set_repetitions(1);
  r.set_omit_outputs(false);
  return r;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

struct Sample {
  double wall = 0;    // seconds, client side, around the whole call
  double kernel = 0;  // server-reported latency.median_seconds (0 for the echo)
  std::size_t request_bytes = 0, response_bytes = 0;
  v1::RunTiming timing;  // the service's split of its own time (empty for the echo)
};

// One call; false (with a message) when it does not answer OK with an output of the
// expected size.
bool Call(const kerneleval::client::KernelEvalClient& client, const v1::RunRequest& request,
          const char* what, Sample* sample) {
  v1::RunResponse response;
  const auto t0 = Clock::now();
  const grpc::Status s = client.Run(request, &response);
  sample->wall = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!s.ok()) {
    std::fprintf(stderr, "%s: Run failed: %d %s\n", what, static_cast<int>(s.error_code()),
                 s.error_message().c_str());
    return false;
  }
  if (response.output().data().size() != request.hidden_states().data().size()) {
    std::fprintf(stderr, "%s: output holds %zu bytes, expected %zu\n", what,
                 response.output().data().size(), request.hidden_states().data().size());
    return false;
  }
  sample->kernel = response.latency().median_seconds();
  sample->timing = response.timing();
  sample->request_bytes = request.ByteSizeLong();
  sample->response_bytes = response.ByteSizeLong();
  return true;
}

// `iterations` calls on each client, alternating in blocks of `block`, after `warmup` calls
// on each.
bool Measure(const kerneleval::client::KernelEvalClient& run_client,
             const kerneleval::client::KernelEvalClient& echo_client, const v1::RunRequest& request,
             int iterations, int block, int warmup, std::vector<Sample>* run,
             std::vector<Sample>* echo) {
  Sample s;
  for (int i = 0; i < warmup; ++i) {
    if (!Call(run_client, request, "service", &s) || !Call(echo_client, request, "echo", &s)) {
      return false;
    }
  }
  bool run_first = true;
  for (int done = 0; done < iterations; done += block) {
    const int n = std::min(block, iterations - done);
    for (int pass = 0; pass < 2; ++pass) {
      const bool is_run = (pass == 0) == run_first;
      for (int i = 0; i < n; ++i) {
        if (!Call(is_run ? run_client : echo_client, request, is_run ? "service" : "echo", &s)) {
          return false;
        }
        (is_run ? run : echo)->push_back(s);
      }
    }
    run_first = !run_first;
  }
  return true;
}

std::vector<double> Walls(const std::vector<Sample>& v, double kernel_factor) {
  std::vector<double> out;
  out.reserve(v.size());
  for (const Sample& s : v) out.push_back(s.wall - kernel_factor * s.kernel);
  return out;
}

// The median of each hop of the service's timing over `samples` (each hop's own median, so
// the rows need not add up to the total's).
void PrintHops(const std::vector<Sample>& samples) {
  const struct {
    const char* name;
    double (v1::RunTiming::*get)() const;
  } hops[] = {
      {"validate", &v1::RunTiming::validate_seconds},
      {"queue (hand-off included)", &v1::RunTiming::queue_seconds},
      {"  of which hand-off", &v1::RunTiming::handoff_seconds},
      {"prepare (on the worker)", &v1::RunTiming::prepare_seconds},
      {"host-to-device", &v1::RunTiming::host_to_device_seconds},
      {"device", &v1::RunTiming::device_seconds},
      {"  of which kernel", &v1::RunTiming::kernel_seconds},
      {"device-to-host", &v1::RunTiming::device_to_host_seconds},
      {"device host round trip", &v1::RunTiming::device_host_seconds},
      {"check", &v1::RunTiming::check_seconds},
      {"respond", &v1::RunTiming::respond_seconds},
      {"server total", &v1::RunTiming::server_seconds},
  };
  std::printf("  service Run's hops, median of %zu calls (us):\n", samples.size());
  std::vector<double> v(samples.size());
  for (const auto& hop : hops) {
    for (std::size_t i = 0; i < samples.size(); ++i) v[i] = (samples[i].timing.*hop.get)();
    std::printf("    %-28s %9.2f\n", hop.name, Percentile(v, 0.5) * 1e6);
  }
  for (std::size_t i = 0; i < samples.size(); ++i) {
    v[i] = samples[i].wall - samples[i].timing.server_seconds();
  }
  std::printf("    %-28s %9.2f\n", "client wall - server total", Percentile(v, 0.5) * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  // As kerneleval-server reads it: scripts/gpu-overhead.sh turns the link's polling off.
  if (const char* us = std::getenv("KERNELEVAL_DEVICE_LINK_SPIN_US")) {
    kerneleval::server::DeviceSettings settings;
    settings.link_spin_us = std::max(0, std::atoi(us));
    kerneleval::server::ApplyDeviceSettings(settings);
  }
  if (!ParseArgs(argc, argv, &opt)) return 2;

  // (a) The real service on a CPU backend, no metrics endpoint, no suites.
  kerneleval::server::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.metrics_listen = "";
  server_options.max_message_bytes = kMaxMessageBytes;
  server_options.worker_idle_spin_us = opt.worker_spin_us;
  std::vector<std::unique_ptr<kerneleval::server::Backend>> backends;
  if (opt.device.empty()) {
    backends.push_back(std::make_unique<kerneleval::server::CpuBackend>("cpu"));
  } else {
    // The device as the server binary runs it, in this process or in a device host.
    server_options.device = opt.device;
    server_options.device_isolation = opt.isolation == "process"
                                          ? kerneleval::server::DeviceIsolation::kProcess
                                          : kerneleval::server::DeviceIsolation::kThread;
    server_options.device_host_path = opt.device_host;
  }
  auto started = kerneleval::server::KernelEvalServer::Start(server_options, std::move(backends));
  if (!started.ok()) {
    std::fprintf(stderr, "server: %s\n", started.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<kerneleval::server::KernelEvalServer> server = std::move(*started);
  if (!server->WaitUntilReady(absl::Seconds(120))) {
    std::fprintf(stderr, "server: not ready after 120 s\n");
    return 1;
  }

  // (b) The echo and (c) the echo answered from a second thread, same message limit.
  EchoService echo_service;
  HandOffEchoService handoff_service;
  RawEchoService raw_service;
  int echo_port = 0, handoff_port = 0, raw_port = 0;
  std::unique_ptr<grpc::Server> echo_server = StartEcho(&echo_service, &echo_port);
  std::unique_ptr<grpc::Server> handoff_server = StartEcho(&handoff_service, &handoff_port);
  std::unique_ptr<grpc::Server> raw_server = StartEcho(&raw_service, &raw_port);
  if (!echo_server || !handoff_server || !raw_server) {
    std::fprintf(stderr, "echo: could not start\n");
    return 1;
  }

  // The client library's channel settings for all (max message 1 GiB by default).
  auto connect = [](int port, std::unique_ptr<kerneleval::client::KernelEvalClient>* c) {
    kerneleval::client::ClientOptions o;
    o.target = "127.0.0.1:" + std::to_string(port);
    o.deadline_seconds = 300;
    return kerneleval::client::KernelEvalClient::Create(o, c);
  };
  std::unique_ptr<kerneleval::client::KernelEvalClient> run_client, echo_client, handoff_client,
      raw_client;
  for (auto [port, client] :
       {std::pair{server->grpc_port(), &run_client}, std::pair{echo_port, &echo_client},
        std::pair{handoff_port, &handoff_client}, std::pair{raw_port, &raw_client}}) {
    const grpc::Status s = connect(port, client);
    if (!s.ok()) {
      std::fprintf(stderr, "connect: %s\n", s.error_message().c_str());
      return 1;
    }
  }

  int failures = 0;

  // Small: B=1 latency.
  const v1::RunRequest small = MakeRequest(1, opt.hidden);
  std::vector<Sample> small_run, small_echo;
  if (!Measure(*run_client, *echo_client, small, opt.small_iterations, /*block=*/50,
               /*warmup=*/opt.quick ? 2 : 200, &small_run, &small_echo)) {
    ++failures;
  }

  // The echo against itself answered from a second thread: the floor of a service that
  // answers from a worker.
  std::vector<Sample> small_handoff, small_echo_again;
  if (!Measure(*handoff_client, *echo_client, small, opt.small_iterations, /*block=*/50,
               /*warmup=*/opt.quick ? 2 : 200, &small_handoff, &small_echo_again)) {
    ++failures;
  }

  // The echo on a raw method, parsing and serializing by hand as the service does.
  std::vector<Sample> small_raw, small_echo_raw;
  if (!Measure(*raw_client, *echo_client, small, opt.small_iterations, /*block=*/50,
               /*warmup=*/opt.quick ? 2 : 200, &small_raw, &small_echo_raw)) {
    ++failures;
  }

  // The echo from a second thread again, now answering as long after the handler as the
  // service's median server total: if a Run's time outside the server beyond the echo is
  // what waiting that long costs the caller and gRPC (idle cores, wake-ups), this echo pays
  // it too.
  double hold_seconds = 0;
  std::vector<Sample> small_held, small_echo_held;
  if (!small_run.empty()) {
    std::vector<double> totals;
    for (const Sample& s : small_run) totals.push_back(s.timing.server_seconds());
    hold_seconds = Percentile(totals, 0.5);
    handoff_service.set_hold(std::chrono::nanoseconds(static_cast<int64_t>(hold_seconds * 1e9)));
    if (!Measure(*handoff_client, *echo_client, small, opt.small_iterations, /*block=*/50,
                 /*warmup=*/opt.quick ? 2 : 200, &small_held, &small_echo_held)) {
      ++failures;
    }
    handoff_service.set_hold(std::chrono::nanoseconds(0));
  }

  // Large: throughput.
  const v1::RunRequest large = MakeRequest(opt.large_batch, opt.hidden);
  std::vector<Sample> large_run, large_echo;
  if (!Measure(*run_client, *echo_client, large, opt.large_iterations, /*block=*/1,
               /*warmup=*/opt.quick ? 1 : 2, &large_run, &large_echo)) {
    ++failures;
  }

  echo_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  raw_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  handoff_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Shutdown(absl::Seconds(5));

  if (!small_run.empty() && !small_echo.empty()) {
    const double run_p50 = Percentile(Walls(small_run, 0), 0.5);
    const double run_p99 = Percentile(Walls(small_run, 0), 0.99);
    const double echo_p50 = Percentile(Walls(small_echo, 0), 0.5);
    const double echo_p99 = Percentile(Walls(small_echo, 0), 0.99);
    const double kernel_p50 = Percentile(
        [&] {
          std::vector<double> k;
          for (const Sample& s : small_run) k.push_back(s.kernel);
          return k;
        }(),
        0.5);
    std::printf(
        "small: B=1 x H=%d bf16, MODE_OUTPUT, %zu calls each (request %zu B, "
        "response %zu B)\n",
        opt.hidden, small_run.size(), small_run[0].request_bytes, small_run[0].response_bytes);
    std::printf("  %-28s %12s %12s\n", "", "p50 (us)", "p99 (us)");
    std::printf("  %-28s %12.1f %12.1f\n", "service Run", run_p50 * 1e6, run_p99 * 1e6);
    std::printf("  %-28s %12.1f %12.1f\n", "echo", echo_p50 * 1e6, echo_p99 * 1e6);
    std::printf("  %-28s %12.2f %12.2f   (target <= 1.2 at p50)\n", "ratio Run / echo",
                run_p50 / echo_p50, run_p99 / echo_p99);
    std::printf("  server-reported kernel median: %.2f us\n", kernel_p50 * 1e6);
    if (!small_handoff.empty() && !small_echo_again.empty()) {
      const double handoff_p50 = Percentile(Walls(small_handoff, 0), 0.5);
      const double again_p50 = Percentile(Walls(small_echo_again, 0), 0.5);
      std::printf("  %-28s %12.1f   (beside the echo again: %.1f us, %.2fx)\n",
                  "echo answered by a thread", handoff_p50 * 1e6, again_p50 * 1e6,
                  handoff_p50 / again_p50);
    }
    if (!small_raw.empty() && !small_echo_raw.empty()) {
      const double raw_p50 = Percentile(Walls(small_raw, 0), 0.5);
      const double again_p50 = Percentile(Walls(small_echo_raw, 0), 0.5);
      std::printf("  %-28s %12.1f   (beside the echo again: %.1f us, %.2fx)\n",
                  "echo on a raw method", raw_p50 * 1e6, again_p50 * 1e6, raw_p50 / again_p50);
    }
    PrintHops(small_run);
    if (!small_held.empty() && !small_echo_held.empty()) {
      const double held_p50 = Percentile(Walls(small_held, 0), 0.5);
      const double again_p50 = Percentile(Walls(small_echo_held, 0), 0.5);
      std::printf("  echo answered by a thread %.2f us after its handler (the server total):\n",
                  hold_seconds * 1e6);
      std::printf("    %-28s %9.2f   (beside the echo: %.1f us, %.2fx)\n", "client wall",
                  held_p50 * 1e6, again_p50 * 1e6, held_p50 / again_p50);
      std::printf("    %-28s %9.2f   (the same for the echo itself: %.2f)\n", "client wall - hold",
                  (held_p50 - hold_seconds) * 1e6, again_p50 * 1e6);
    }
    std::printf("\n");
  }

  if (!large_run.empty() && !large_echo.empty()) {
    const double bytes =
        static_cast<double>(large_run[0].request_bytes + large_run[0].response_bytes);
    const double echo_bytes =
        static_cast<double>(large_echo[0].request_bytes + large_echo[0].response_bytes);
    const double echo_wall = Percentile(Walls(large_echo, 0), 0.5);
    const double echo_rate = echo_bytes / echo_wall;
    std::printf(
        "large: B=%lld x H=%d bf16, MODE_OUTPUT, %zu calls each; request %.1f MB, "
        "response %.1f MB (echo %.1f MB)\n",
        static_cast<long long>(opt.large_batch), opt.hidden, large_run.size(),
        large_run[0].request_bytes / 1e6, large_run[0].response_bytes / 1e6,
        large_echo[0].response_bytes / 1e6);
    std::printf("  %-44s %12s %12s %10s\n", "", "median (ms)", "GB/s", "vs echo");
    std::printf("  %-44s %12.1f %12.3f %10s\n", "echo", echo_wall * 1e3, echo_rate / 1e9, "1.00");
    const struct {
      const char* label;
      double kernel_factor;
    } rows[] = {{"service Run, wall (kernel included)", 0},
                {"service Run, minus the server's kernel median", 1}};
    for (const auto& row : rows) {
      const double wall = Percentile(Walls(large_run, row.kernel_factor), 0.5);
      const double rate = bytes / wall;
      std::printf("  %-44s %12.1f %12.3f %10.2f\n", row.label, wall * 1e3, rate / 1e9,
                  rate / echo_rate);
    }
    std::vector<double> k;
    for (const Sample& s : large_run) k.push_back(s.kernel);
    std::printf("  server-reported kernel median: %.1f ms (target: rate >= 0.9x echo)\n",
                Percentile(k, 0.5) * 1e3);
  }

  if (failures > 0) {
    std::printf("FAILED: %d path(s) did not answer OK\n", failures);
    return 1;
  }
  std::printf("device: %s, isolation: %s, CUPTI %s\n",
              opt.device.empty() ? "cpu (in-process)" : opt.device.c_str(),
              opt.device.empty() ? "thread" : opt.isolation.c_str(), opt.cupti ? "on" : "off");
  std::printf("OK: service and echo answered every call\n");
  return 0;
}
