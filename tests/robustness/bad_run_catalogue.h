// The one catalogue of bad Run requests: each entry mutates a valid request into a bad one
// and says the exact status code the server answers with and a substring of the message that
// names the field. bad_input_test sends every entry through the client library;
// cli_bad_input_test sends the entries the command line can express through `kerneleval run`.
// Both run the server with CatalogueServerOptions(), whose small limits make the limit errors
// cheap to provoke.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "robustness_util.h"
#include "test_server.h"

namespace kerneleval::testing {

inline constexpr int kCatalogueMaxMessageBytes = 1 << 20;
inline constexpr std::uint64_t kCatalogueMaxTensorBytes = 256 << 10;

// 1 MiB messages, 256 KiB tensors, batch and hidden at most 4096.
inline server::ServerOptions CatalogueServerOptions() {
  server::ServerOptions o = LoopbackOptions();
  o.max_message_bytes = kCatalogueMaxMessageBytes;
  o.limits.max_tensor_bytes = kCatalogueMaxTensorBytes;
  o.limits.max_batch = 4096;
  o.limits.max_hidden = 4096;
  return o;
}

// The valid request every entry starts from: bf16 [2, 32], MODE_OUTPUT.
inline v1::RunRequest CatalogueBaseRequest() {
  return MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 2, 32, 11);
}

struct BadRunCase {
  const char* name;
  std::function<void(v1::RunRequest*)> mutate;
  grpc::StatusCode code;
  const char* field;  // must appear in the message
  // Hostile input echoed: > 0 bounds the message's length, and `also` must appear in it too
  // (the length of what was sent, quoted instead of the whole).
  std::size_t max_message_bytes = 0;
  const char* also = "";
  double deadline_seconds = 0;  // > 0: call with this client deadline instead
};

inline void SetShape(v1::Tensor* t, const std::vector<std::int64_t>& shape) {
  t->clear_shape();
  for (auto s : shape) t->add_shape(s);
}

inline std::vector<BadRunCase> BadRunCatalogue() {
  using Code = grpc::StatusCode;
  using v1::RunRequest;
  return {
      {"unspecified dtype",
       [](RunRequest* r) { r->mutable_hidden_states()->set_dtype(v1::DTYPE_UNSPECIFIED); },
       Code::INVALID_ARGUMENT, "hidden_states.dtype"},
      {"unknown dtype value",
       [](RunRequest* r) { r->mutable_hidden_states()->set_dtype(static_cast<v1::DType>(9)); },
       Code::INVALID_ARGUMENT, "hidden_states.dtype"},
      {"residual dtype differs",
       [](RunRequest* r) { r->mutable_residual()->set_dtype(v1::DTYPE_FP16); },
       Code::INVALID_ARGUMENT, "residual.dtype"},
      {"weight dtype differs",
       [](RunRequest* r) {
         *r->mutable_weight() = MakeRunRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT, 1, 32, 5).weight();
       },
       Code::INVALID_ARGUMENT, "weight.dtype"},
      {"hidden_states rank 3",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {2, 4, 8});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape"},
      {"hidden_states rank 1", [](RunRequest* r) { SetShape(r->mutable_hidden_states(), {64}); },
       Code::INVALID_ARGUMENT, "hidden_states.shape"},
      {"hidden_states rank 0", [](RunRequest* r) { r->mutable_hidden_states()->clear_shape(); },
       Code::INVALID_ARGUMENT, "hidden_states.shape"},
      {"hidden_states of 100,000 dimensions",
       [](RunRequest* r) {
         v1::Tensor* t = r->mutable_hidden_states();
         t->clear_shape();
         for (int i = 0; i < 100000; ++i) t->add_shape(1);
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape", 1024},
      {"weight rank 2",
       [](RunRequest* r) {
         SetShape(r->mutable_weight(), {1, 32});
       },
       Code::INVALID_ARGUMENT, "weight.shape"},
      {"residual hidden differs",
       [](RunRequest* r) {
         *r->mutable_residual() =
             MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 2, 16, 5).residual();
       },
       Code::INVALID_ARGUMENT, "residual.shape"},
      {"residual batch differs",
       [](RunRequest* r) {
         *r->mutable_residual() =
             MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 1, 32, 5).residual();
       },
       Code::INVALID_ARGUMENT, "residual.shape"},
      {"weight hidden differs",
       [](RunRequest* r) {
         *r->mutable_weight() = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 1, 31, 5).weight();
       },
       Code::INVALID_ARGUMENT, "weight.shape"},
      {"hidden_states bytes short",
       [](RunRequest* r) { r->mutable_hidden_states()->mutable_data()->pop_back(); },
       Code::INVALID_ARGUMENT, "hidden_states.data"},
      {"hidden_states bytes long",
       [](RunRequest* r) { r->mutable_hidden_states()->mutable_data()->append(2, '\0'); },
       Code::INVALID_ARGUMENT, "hidden_states.data"},
      {"residual bytes empty", [](RunRequest* r) { r->mutable_residual()->clear_data(); },
       Code::INVALID_ARGUMENT, "residual.data"},
      {"residual bytes long",
       [](RunRequest* r) { r->mutable_residual()->mutable_data()->append("xx"); },
       Code::INVALID_ARGUMENT, "residual.data"},
      {"weight bytes short", [](RunRequest* r) { r->mutable_weight()->mutable_data()->resize(2); },
       Code::INVALID_ARGUMENT, "weight.data"},
      {"weight bytes long",
       [](RunRequest* r) { r->mutable_weight()->mutable_data()->append(64, 'x'); },
       Code::INVALID_ARGUMENT, "weight.data"},
      {"missing hidden_states", [](RunRequest* r) { r->clear_hidden_states(); },
       Code::INVALID_ARGUMENT, "hidden_states"},
      {"missing residual", [](RunRequest* r) { r->clear_residual(); }, Code::INVALID_ARGUMENT,
       "residual"},
      {"missing weight", [](RunRequest* r) { r->clear_weight(); }, Code::INVALID_ARGUMENT,
       "weight"},
      {"zero batch",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {0, 32});
         SetShape(r->mutable_residual(), {0, 32});
         r->mutable_hidden_states()->clear_data();
         r->mutable_residual()->clear_data();
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[0]"},
      {"zero hidden",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {2, 0});
         SetShape(r->mutable_residual(), {2, 0});
         SetShape(r->mutable_weight(), {0});
         r->mutable_hidden_states()->clear_data();
         r->mutable_residual()->clear_data();
         r->mutable_weight()->clear_data();
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[1]"},
      {"negative batch",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {-2, 32});
         SetShape(r->mutable_residual(), {-2, 32});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[0]"},
      {"negative hidden",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {2, -8});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[1]"},
      {"most negative hidden",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {2, std::numeric_limits<std::int64_t>::min()});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[1]"},
      {"dimensions overflow 64 bits",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {std::int64_t{1} << 40, std::int64_t{1} << 40});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape"},
      {"int64 max dimensions",
       [](RunRequest* r) {
         const auto max = std::numeric_limits<std::int64_t>::max();
         SetShape(r->mutable_hidden_states(), {max, max});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape"},
      {"shape over the tensor limit, few bytes",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {1 << 20, 32});
       },
       Code::RESOURCE_EXHAUSTED, "hidden_states"},
      {"shape of 2^30 x 2048, few bytes",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {std::int64_t{1} << 30, 2048});
       },
       Code::RESOURCE_EXHAUSTED, "hidden_states"},
      {"real tensor over the tensor limit",
       [](RunRequest* r) {
         // 300 KiB of fp32 per tensor: over the 256 KiB limit, under the 1 MiB message.
         *r = MakeRunRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT, 75, 1024, 3);
       },
       Code::RESOURCE_EXHAUSTED, "hidden_states"},
      {"batch over max_batch",
       [](RunRequest* r) { *r = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 5000, 1, 3); },
       Code::RESOURCE_EXHAUSTED, "hidden_states.shape[0]"},
      {"hidden over max_hidden",
       [](RunRequest* r) { *r = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 1, 5000, 3); },
       Code::RESOURCE_EXHAUSTED, "hidden_states.shape[1]"},
      {"eps NaN", [](RunRequest* r) { r->set_eps(std::nan("")); }, Code::INVALID_ARGUMENT, "eps"},
      {"eps negative", [](RunRequest* r) { r->set_eps(-1e-6); }, Code::INVALID_ARGUMENT, "eps"},
      {"eps zero", [](RunRequest* r) { r->set_eps(0); }, Code::INVALID_ARGUMENT, "eps"},
      {"eps +inf", [](RunRequest* r) { r->set_eps(INFINITY); }, Code::INVALID_ARGUMENT, "eps"},
      {"eps -inf", [](RunRequest* r) { r->set_eps(-INFINITY); }, Code::INVALID_ARGUMENT, "eps"},
      {"eps beyond fp32", [](RunRequest* r) { r->set_eps(1e300); }, Code::INVALID_ARGUMENT, "eps"},
      {"unknown mode", [](RunRequest* r) { r->set_mode(static_cast<v1::Mode>(42)); },
       Code::INVALID_ARGUMENT, "mode"},
      {"unknown device", [](RunRequest* r) { r->set_device("cuda:7"); }, Code::NOT_FOUND, "device"},
      {"10 KB device name", [](RunRequest* r) { r->set_device(std::string(10240, 'z')); },
       Code::NOT_FOUND, "device", 1024, "10240"},
      {"unknown implementation", [](RunRequest* r) { r->set_implementation("triton_magic"); },
       Code::NOT_FOUND, "implementation"},
      {"10 KB implementation name",
       [](RunRequest* r) { r->set_implementation(std::string(10240, 'i')); }, Code::NOT_FOUND,
       "implementation", 1024, "10240"},
      {"repetitions over the maximum", [](RunRequest* r) { r->set_repetitions(10001); },
       Code::INVALID_ARGUMENT, "repetitions"},
      {"repetitions uint32 max", [](RunRequest* r) { r->set_repetitions(4294967295u); },
       Code::INVALID_ARGUMENT, "repetitions"},
      {"timer out of range", [](RunRequest* r) { r->set_timer(static_cast<v1::Timer>(77)); },
       Code::INVALID_ARGUMENT, "timer"},
      {"CUDA timer on the CPU", [](RunRequest* r) { r->set_timer(v1::TIMER_CUDA_EVENTS); },
       Code::INVALID_ARGUMENT, "timer"},
      {"CUPTI timer on the CPU", [](RunRequest* r) { r->set_timer(v1::TIMER_CUPTI); },
       Code::INVALID_ARGUMENT, "timer"},
      {"warmup over the maximum", [](RunRequest* r) { r->set_warmup(1001); },
       Code::INVALID_ARGUMENT, "warmup"},
      // gRPC rounds deadlines up to the millisecond: the work must take longer than that.
      {"deadline of 1 ns",
       [](RunRequest* r) {
         *r = MakeRunRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT, 64, 1024, 3);
         r->set_warmup(1000);
         r->set_repetitions(1000);
       },
       Code::DEADLINE_EXCEEDED, "", 0, "", 1e-9},
      {"message over max_message_bytes",
       [](RunRequest* r) {
         r->mutable_hidden_states()->mutable_data()->append(std::size_t{2} << 20, '\0');
       },
       Code::RESOURCE_EXHAUSTED, ""},
  };
}

}  // namespace kerneleval::testing
