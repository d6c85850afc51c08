// Two owners of one server, alice and bob, as the owner-isolation tests meet them: their
// tokens, the token file that admits both, a call that carries one of them, and a
// one-kernel source that compiles without a GPU.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "server/app/server.h"

namespace kerneleval::testing {

inline constexpr char kAliceToken[] = "alice-SECRET-7f3a9c";
inline constexpr char kBobToken[] = "bob-SECRET-41d8e2";

// The server's --auth-token file for both owners.
inline void AdmitAliceAndBob(server::ServerOptions* options) {
  options->auth_token =
      std::string("# two owners\nalice:") + kAliceToken + "\nbob:" + kBobToken + "\n";
}

// A call carrying `token` (no authorization at all when null), with a deadline far enough
// that only a hang reaches it.
inline std::unique_ptr<grpc::ClientContext> As(
    const char* token, std::chrono::seconds deadline = std::chrono::seconds(300)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + deadline);
  if (token != nullptr) context->AddMetadata("authorization", std::string("Bearer ") + token);
  return context;
}

// One kernel, `tiny`, writing eps to the first element of each block's output.
inline constexpr char kTinySource[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";

}  // namespace kerneleval::testing
