// A real server on a loopback port with submissions on, compiling in real kerneleval-compile
// processes (NVRTC needs no GPU), and the client library's Submissions client on it: what
// every test of the Submissions service starts from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/submit_client.h"
#include "test_server.h"

namespace kerneleval::testing {

// LoopbackOptions with submissions on and the compile tool the build made.
inline server::ServerOptions SubmissionOptions() {
  server::ServerOptions o = LoopbackOptions();
  o.submissions.enabled = true;
  o.submissions.compiler.tool_path = KERNELEVAL_TEST_COMPILE_TOOL;
  return o;
}

// A launch plan of one kernel `entry`, `block` threads, one row per CTA.
inline v1::SubmissionSpec OneKernelSpec(const std::string& name, const std::string& source,
                                        const std::string& entry, v1::DType dtype,
                                        std::uint32_t block, std::uint32_t rows_per_block = 1) {
  v1::SubmissionSpec spec;
  spec.set_name(name);
  spec.set_source(source);
  spec.set_dtype(dtype);
  v1::KernelLaunch* k = spec.mutable_launch_plan()->add_kernels();
  k->set_entry(entry);
  k->set_block_size(block);
  k->set_rows_per_block(rows_per_block);
  return spec;
}

struct SubmissionsServer {
  TestServer server;
  std::shared_ptr<grpc::Channel> channel;  // to the server, with the client's options
  std::unique_ptr<client::SubmissionsClient> submissions;
};

// Starts the server on `backends` (CPU "cpu" when empty) and connects a Submissions client
// with `client_options` (its token, say) and a deadline a compile fits in.
inline SubmissionsServer StartSubmissionsServer(
    server::ServerOptions options = SubmissionOptions(), client::ClientOptions client_options = {},
    std::vector<std::unique_ptr<server::Backend>> backends = {}) {
  SubmissionsServer s;
  s.server = StartServer(std::move(options), std::move(backends), client_options);
  client_options.target = s.server.target();
  client_options.deadline_seconds = 120;
  EXPECT_TRUE(client::MakeChannel(client_options, &s.channel).ok());
  s.submissions = std::make_unique<client::SubmissionsClient>(s.channel, client_options);
  return s;
}

}  // namespace kerneleval::testing
