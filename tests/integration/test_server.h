// A real kerneleval server on a free loopback port, in the test process, driven through
// the client library: the same code paths as the binary, with hooks for test-only
// implementations.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "client/kerneleval_client.h"
#include "kerneleval/v1/kerneleval.grpc.pb.h"
#include "request_helpers.h"
#include "server/app/server.h"
#include "server/device/cpu_backend.h"

namespace kerneleval::testing {

struct TestServer {
  std::unique_ptr<server::KernelEvalServer> server;
  std::unique_ptr<client::KernelEvalClient> client;

  std::string target() const { return "127.0.0.1:" + std::to_string(server->grpc_port()); }
  // gRPC's generated stub on its own channel, for what the client library does not offer:
  // cancelling a stream mid-way, a deadline per call.
  std::unique_ptr<v1::KernelEval::Stub> NewRawStub() const {
    return v1::KernelEval::NewStub(
        grpc::CreateChannel(target(), grpc::InsecureChannelCredentials()));
  }
};

// kerneleval-device-host: next to the test binary when both were copied together (a
// bundle for a GPU machine), else where the build put it.
inline std::string DeviceHostPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path sibling = exe.parent_path() / "kerneleval-device-host";
  if (!ec && std::filesystem::exists(sibling, ec)) return sibling.string();
  return KERNELEVAL_TEST_DEVICE_HOST;
}

// The repository's suites. A GPU machine running a bundle names its copy of the repository in
// KERNELEVAL_SOURCE_DIR, as the GPU tests' sources do: the path built in is the build
// machine's.
inline std::string TestSuitesDir() {
  const char* root = std::getenv("KERNELEVAL_SOURCE_DIR");
  if (root != nullptr && *root != '\0') return std::string(root) + "/suites";
  return KERNELEVAL_TEST_SUITES_DIR;
}

inline server::ServerOptions LoopbackOptions() {
  server::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_listen = "127.0.0.1:0";
  o.suites_dir = TestSuitesDir();
  o.telemetry_seconds = 0.2;
  return o;
}

// Starts a server on `backends` (CPU "cpu" when empty), waits for readiness and connects.
inline TestServer StartServer(server::ServerOptions options = LoopbackOptions(),
                              std::vector<std::unique_ptr<server::Backend>> backends = {},
                              client::ClientOptions client_options = {}) {
  TestServer t;
  if (backends.empty() && options.device == "auto") {
    backends.push_back(std::make_unique<server::CpuBackend>("cpu"));
  }
  auto started = server::KernelEvalServer::Start(options, std::move(backends));
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return t;
  t.server = std::move(*started);
  EXPECT_TRUE(t.server->WaitUntilReady(absl::Seconds(120)));
  client_options.target = t.target();
  client_options.deadline_seconds = 300;
  const grpc::Status s = client::KernelEvalClient::Create(client_options, &t.client);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return t;
}

// A small fp32 Run request ([batch, hidden] of ones), for tests about scheduling rather
// than numerics.
inline v1::RunRequest SmallRun(int batch, int hidden) {
  v1::RunRequest run;
  const std::string row_bytes(static_cast<std::size_t>(batch * hidden) * 4, '\x01');
  for (v1::Tensor* tensor : {run.mutable_hidden_states(), run.mutable_residual()}) {
    tensor->set_dtype(v1::DTYPE_FP32);
    tensor->add_shape(batch);
    tensor->add_shape(hidden);
    tensor->set_data(row_bytes);
  }
  run.mutable_weight()->set_dtype(v1::DTYPE_FP32);
  run.mutable_weight()->add_shape(hidden);
  run.mutable_weight()->set_data(std::string(static_cast<std::size_t>(hidden) * 4, '\x01'));
  return run;
}

// GET /metrics over plain HTTP/1.0 with `headers` ("Name: value\r\n" each); the whole
// response, empty on any failure.
inline std::string ScrapeMetrics(int port, const std::string& headers = "") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "\r\n";
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) body.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return body;
}

// The value of the first sample of `name` that carries every one of `labels`; -1 when none
// does.
inline double MetricValue(const std::string& exposition, const std::string& name,
                          const std::vector<std::pair<std::string, std::string>>& labels) {
  std::size_t pos = 0;
  while ((pos = exposition.find(name + "{", pos)) != std::string::npos) {
    const bool line_start = pos == 0 || exposition[pos - 1] == '\n';
    const std::size_t close = exposition.find('}', pos);
    const std::size_t end = exposition.find('\n', pos);
    if (close == std::string::npos) break;
    const std::string label_text = exposition.substr(pos, close - pos);
    bool all = line_start;
    for (const auto& [key, value] : labels) {
      const std::string pair = key + "=\"" + value + "\"";
      all = all && (label_text.find("{" + pair) != std::string::npos ||
                    label_text.find("," + pair) != std::string::npos);
    }
    if (all) return std::strtod(exposition.substr(close + 1, end - close - 1).c_str(), nullptr);
    pos = close;
  }
  return -1;
}

}  // namespace kerneleval::testing
