// A real kerneleval server on a free loopback port, in the test process, driven through
// the client library: the same code paths as the binary, with hooks for test-only
// implementations.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/kerneleval_client.h"
#include "request_helpers.h"
#include "server/cpu_backend.h"
#include "server/server.h"

namespace kerneleval::testing {

struct TestServer {
  std::unique_ptr<server::KernelEvalServer> server;
  std::unique_ptr<client::KernelEvalClient> client;

  std::string target() const { return "127.0.0.1:" + std::to_string(server->grpc_port()); }
};

inline server::ServerOptions LoopbackOptions() {
  server::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_listen = "127.0.0.1:0";
  o.suites_dir = KERNELEVAL_TEST_SUITES_DIR;
  o.nvml_sample_seconds = 0.2;
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
  EXPECT_TRUE(t.server->WaitUntilReady(absl::Seconds(60)));
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

}  // namespace kerneleval::testing
