// A catalogue of malformed requests, each with the exact status code and the field its
// message must name; after every one the server must still compute a valid Run correctly.
// The server runs with small limits (1 MiB messages, 256 KiB tensors, batch 4096, hidden
// 4096) so that the limit errors are cheap to provoke.
#include <cmath>
#include <functional>
#include <limits>

#include <grpcpp/generic/generic_stub.h>

#include "robustness_util.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using v1::BenchmarkRequest;
using v1::RunRequest;

constexpr int kMaxMessageBytes = 1 << 20;
constexpr std::uint64_t kMaxTensorBytes = 256 << 10;

struct BadRun {
  const char* name;
  std::function<void(RunRequest*)> mutate;
  grpc::StatusCode code;
  const char* field;            // must appear in the message
  double deadline_seconds = 0;  // > 0: call with this client deadline instead
};

struct BadBenchmark {
  const char* name;
  std::function<void(BenchmarkRequest*)> mutate;
  grpc::StatusCode code;
  const char* field;
  double deadline_seconds = 0;
};

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o = LoopbackOptions();
    o.max_message_bytes = kMaxMessageBytes;
    o.limits.max_tensor_bytes = kMaxTensorBytes;
    o.limits.max_batch = 4096;
    o.limits.max_hidden = 4096;
    server_ = new TestServer(StartServer(o));
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_->client, nullptr); }

  static std::unique_ptr<client::KernelEvalClient> ClientWithDeadline(double seconds) {
    client::ClientOptions o;
    o.target = server_->target();
    o.deadline_seconds = seconds;
    std::unique_ptr<client::KernelEvalClient> c;
    EXPECT_TRUE(client::KernelEvalClient::Create(o, &c).ok());
    return c;
  }

  // A valid Run whose output must match the local computation bit for bit.
  static void ExpectServesValidRun(std::uint64_t seed) {
    const RunRequest good =
        MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT_AND_RESIDUAL, 3, 40, seed);
    v1::RunResponse resp;
    const grpc::Status s = server_->client->Run(good, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(CompareWithLocal(good, resp), "");
  }

  static TestServer* server_;
};
TestServer* BadInputTest::server_ = nullptr;

void SetShape(v1::Tensor* t, std::vector<std::int64_t> shape) {
  t->clear_shape();
  for (auto s : shape) t->add_shape(s);
}

TEST_F(BadInputTest, MalformedRunRequests) {
  using Code = grpc::StatusCode;
  const std::vector<BadRun> cases = {
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
       [](RunRequest* r) { r->mutable_weight()->set_dtype(v1::DTYPE_FP32); },
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
      {"weight rank 2",
       [](RunRequest* r) {
         SetShape(r->mutable_weight(), {1, 32});
       },
       Code::INVALID_ARGUMENT, "weight.shape"},
      {"residual hidden differs",
       [](RunRequest* r) {
         SetShape(r->mutable_residual(), {2, 16});
       },
       Code::INVALID_ARGUMENT, "residual.shape"},
      {"residual batch differs",
       [](RunRequest* r) {
         SetShape(r->mutable_residual(), {1, 32});
       },
       Code::INVALID_ARGUMENT, "residual.shape"},
      {"weight hidden differs", [](RunRequest* r) { SetShape(r->mutable_weight(), {31}); },
       Code::INVALID_ARGUMENT, "weight.shape"},
      {"hidden_states bytes short",
       [](RunRequest* r) { r->mutable_hidden_states()->mutable_data()->resize(127); },
       Code::INVALID_ARGUMENT, "hidden_states.data"},
      {"hidden_states bytes long",
       [](RunRequest* r) { r->mutable_hidden_states()->mutable_data()->append(2, '\0'); },
       Code::INVALID_ARGUMENT, "hidden_states.data"},
      {"residual bytes empty", [](RunRequest* r) { r->mutable_residual()->clear_data(); },
       Code::INVALID_ARGUMENT, "residual.data"},
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
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[1]"},
      {"negative batch",
       [](RunRequest* r) {
         SetShape(r->mutable_hidden_states(), {-2, 32});
         SetShape(r->mutable_residual(), {-2, 32});
       },
       Code::INVALID_ARGUMENT, "hidden_states.shape[0]"},
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
      {"very long device name", [](RunRequest* r) { r->set_device(std::string(300, 'z')); },
       Code::NOT_FOUND, "device"},
      {"unknown implementation", [](RunRequest* r) { r->set_implementation("triton_magic"); },
       Code::NOT_FOUND, "implementation"},
      {"repetitions over the maximum", [](RunRequest* r) { r->set_repetitions(10001); },
       Code::INVALID_ARGUMENT, "repetitions"},
      {"repetitions uint32 max", [](RunRequest* r) { r->set_repetitions(4294967295u); },
       Code::INVALID_ARGUMENT, "repetitions"},
      {"timer out of range", [](RunRequest* r) { r->set_timer(static_cast<v1::Timer>(77)); },
       Code::INVALID_ARGUMENT, "timer"},
      {"CUDA timer on the CPU", [](RunRequest* r) { r->set_timer(v1::TIMER_CUDA_EVENTS); },
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
       Code::DEADLINE_EXCEEDED, "", 1e-9},
      {"message over max_message_bytes",
       [](RunRequest* r) {
         r->mutable_hidden_states()->mutable_data()->append(std::size_t{2} << 20, '\0');
       },
       Code::RESOURCE_EXHAUSTED, ""},
  };
  const RunRequest base = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 2, 32, 11);
  std::uint64_t seed = 100;
  for (const BadRun& c : cases) {
    SCOPED_TRACE(c.name);
    RunRequest bad = base;
    c.mutate(&bad);
    v1::RunResponse resp;
    const grpc::Status s = c.deadline_seconds > 0
                               ? ClientWithDeadline(c.deadline_seconds)->Run(bad, &resp)
                               : server_->client->Run(bad, &resp);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_NE(s.error_message().find(c.field), std::string::npos) << s.error_message();
    EXPECT_FALSE(resp.has_output());
    ExpectServesValidRun(++seed);
  }
  std::cout << cases.size() << " malformed Run requests rejected\n";
}

v1::SuiteDefinition GoodSuite() { return SmallSuite(v1::DTYPE_FP16, {1, 5}, 48); }

TEST_F(BadInputTest, MalformedBenchmarkRequests) {
  using Code = grpc::StatusCode;
  auto suite = [](BenchmarkRequest* r) { return r->mutable_custom_suite(); };
  const std::vector<BadBenchmark> cases = {
      {"unknown suite",
       [](BenchmarkRequest* r) {
         r->clear_custom_suite();
         r->set_suite("nope");
       },
       Code::NOT_FOUND, "suite"},
      {"suite and custom_suite",
       [](BenchmarkRequest* r) { r->set_suite("fused_add_rmsnorm_h2048"); }, Code::INVALID_ARGUMENT,
       "custom_suite"},
      {"neither suite nor custom_suite", [](BenchmarkRequest* r) { r->clear_custom_suite(); },
       Code::INVALID_ARGUMENT, "suite"},
      {"custom suite missing the hidden_size axis",
       [&](BenchmarkRequest* r) { suite(r)->mutable_axes()->RemoveLast(); }, Code::INVALID_ARGUMENT,
       "custom_suite.axes"},
      {"custom suite unknown axis",
       [&](BenchmarkRequest* r) { suite(r)->add_axes()->set_name("seq_len"); },
       Code::INVALID_ARGUMENT, "custom_suite.axes[2]"},
      {"custom suite duplicate axis",
       [&](BenchmarkRequest* r) { suite(r)->add_axes()->set_name("batch_size"); },
       Code::INVALID_ARGUMENT, "custom_suite.axes[2]"},
      {"custom suite const axis of 0",
       [&](BenchmarkRequest* r) { suite(r)->mutable_axes(1)->set_value(0); },
       Code::INVALID_ARGUMENT, "custom_suite.axes[1].value"},
      {"custom suite unspecified dtype",
       [&](BenchmarkRequest* r) { suite(r)->set_dtype(v1::DTYPE_UNSPECIFIED); },
       Code::INVALID_ARGUMENT, "custom_suite.dtype"},
      {"custom suite unknown dtype",
       [&](BenchmarkRequest* r) { suite(r)->set_dtype(static_cast<v1::DType>(77)); },
       Code::INVALID_ARGUMENT, "custom_suite.dtype"},
      {"custom suite unknown mode",
       [&](BenchmarkRequest* r) { suite(r)->set_mode(static_cast<v1::Mode>(-3)); },
       Code::INVALID_ARGUMENT, "custom_suite.mode"},
      {"custom suite eps NaN", [&](BenchmarkRequest* r) { suite(r)->set_eps(std::nan("")); },
       Code::INVALID_ARGUMENT, "custom_suite.eps"},
      {"custom suite bad name",
       [&](BenchmarkRequest* r) { suite(r)->set_name("../../etc/passwd"); }, Code::INVALID_ARGUMENT,
       "custom_suite.name"},
      {"custom suite no workloads", [&](BenchmarkRequest* r) { suite(r)->clear_workloads(); },
       Code::INVALID_ARGUMENT, "custom_suite.workloads"},
      {"custom suite duplicate workload",
       [&](BenchmarkRequest* r) { *suite(r)->add_workloads() = suite(r)->workloads(0); },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[2].name"},
      {"workload missing its var axis",
       [&](BenchmarkRequest* r) { suite(r)->mutable_workloads(1)->clear_axes(); },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[1].axes"},
      {"workload sets a const axis",
       [&](BenchmarkRequest* r) {
         (*suite(r)->mutable_workloads(0)->mutable_axes())["hidden_size"] = 48;
       },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[0].axes.hidden_size"},
      {"workload axis negative",
       [&](BenchmarkRequest* r) {
         (*suite(r)->mutable_workloads(0)->mutable_axes())["batch_size"] = -1;
       },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[0].axes.batch_size"},
      {"workload axis over 2^31-1",
       [&](BenchmarkRequest* r) {
         (*suite(r)->mutable_workloads(0)->mutable_axes())["batch_size"] = std::int64_t{1} << 31;
       },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[0].axes.batch_size"},
      {"tolerance negative rtol",
       [&](BenchmarkRequest* r) {
         suite(r)->mutable_workloads(0)->mutable_tolerance()->set_rtol(-1);
       },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[0].tolerance.rtol"},
      {"tolerance NaN atol",
       [&](BenchmarkRequest* r) {
         suite(r)->mutable_workloads(1)->mutable_tolerance()->set_atol(std::nan(""));
       },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[1].tolerance.atol"},
      {"tolerance matched ratio over 1",
       [&](BenchmarkRequest* r) {
         suite(r)->mutable_workloads(0)->mutable_tolerance()->set_required_matched_ratio(1.5);
       },
       Code::INVALID_ARGUMENT, "custom_suite.workloads[0].tolerance.required_matched_ratio"},
      {"workload over the tensor limit",
       [&](BenchmarkRequest* r) {
         (*suite(r)->mutable_workloads(1)->mutable_axes())["batch_size"] = 4096;
       },
       Code::RESOURCE_EXHAUSTED, "workloads[1]"},
      {"repetitions over the maximum",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_repetitions(10001); },
       Code::INVALID_ARGUMENT, "protocol.repetitions"},
      {"repetitions zero without adaptive",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_repetitions(0); },
       Code::INVALID_ARGUMENT, "protocol.repetitions"},
      {"warmup over the maximum",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_warmup(5000); }, Code::INVALID_ARGUMENT,
       "protocol.warmup"},
      {"adaptive min over max",
       [](BenchmarkRequest* r) {
         r->mutable_protocol()->mutable_adaptive()->set_min_samples(50);
         r->mutable_protocol()->mutable_adaptive()->set_max_samples(20);
       },
       Code::INVALID_ARGUMENT, "protocol.adaptive.min_samples"},
      {"adaptive max over the maximum",
       [](BenchmarkRequest* r) {
         r->mutable_protocol()->mutable_adaptive()->set_max_samples(20000);
       },
       Code::INVALID_ARGUMENT, "protocol.adaptive.max_samples"},
      {"adaptive spread NaN",
       [](BenchmarkRequest* r) {
         r->mutable_protocol()->mutable_adaptive()->set_target_relative_spread(std::nan(""));
       },
       Code::INVALID_ARGUMENT, "protocol.adaptive.target_relative_spread"},
      {"adaptive seconds -inf",
       [](BenchmarkRequest* r) {
         r->mutable_protocol()->mutable_adaptive()->set_max_seconds(-INFINITY);
       },
       Code::INVALID_ARGUMENT, "protocol.adaptive.max_seconds"},
      {"max_total_seconds negative",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_max_total_seconds(-1); },
       Code::INVALID_ARGUMENT, "protocol.max_total_seconds"},
      {"graph_calls over the maximum",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_graph_calls(100000); },
       Code::INVALID_ARGUMENT, "protocol.graph_calls"},
      {"unknown cache mode",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_cache(static_cast<v1::CacheMode>(9)); },
       Code::INVALID_ARGUMENT, "protocol.cache"},
      {"unknown timer",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_timer(static_cast<v1::Timer>(12)); },
       Code::INVALID_ARGUMENT, "protocol.timer"},
      {"CUDA graph on the CPU",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_cuda_graph(true); },
       Code::INVALID_ARGUMENT, "protocol.cuda_graph"},
      {"CUPTI timer on the CPU",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_timer(v1::TIMER_CUPTI); },
       Code::INVALID_ARGUMENT, "protocol.timer"},
      {"CUDA events timer on the CPU",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_timer(v1::TIMER_CUDA_EVENTS); },
       Code::INVALID_ARGUMENT, "protocol.timer"},
      {"unknown device", [](BenchmarkRequest* r) { r->set_device("cuda:0"); }, Code::NOT_FOUND,
       "device"},
      {"unknown implementation",
       [](BenchmarkRequest* r) {
         r->add_implementations("cpu_fused");
         r->add_implementations("bogus");
       },
       Code::NOT_FOUND, "implementations[1]"},
      {"deadline of 1 ns",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_repetitions(5000); },
       Code::DEADLINE_EXCEEDED, "", 1e-9},
  };
  BenchmarkRequest base;
  *base.mutable_custom_suite() = GoodSuite();
  base.mutable_protocol()->set_warmup(0);
  base.mutable_protocol()->set_repetitions(2);
  // The base request itself is served.
  ASSERT_TRUE(server_->client->Benchmark(base, nullptr).ok());
  std::uint64_t seed = 500;
  for (const BadBenchmark& c : cases) {
    SCOPED_TRACE(c.name);
    BenchmarkRequest bad = base;
    c.mutate(&bad);
    int events = 0;
    auto count = [&](const v1::BenchmarkEvent&) { ++events; };
    const grpc::Status s = c.deadline_seconds > 0
                               ? ClientWithDeadline(c.deadline_seconds)->Benchmark(bad, count)
                               : server_->client->Benchmark(bad, count);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_NE(s.error_message().find(c.field), std::string::npos) << s.error_message();
    EXPECT_EQ(events, 0);
    ExpectServesValidRun(++seed);
  }
  std::cout << cases.size() << " malformed Benchmark requests rejected\n";
}

// Bytes that are not a RunRequest at all, straight onto the wire.
// Sends raw bytes as a Run request, bypassing the client's serialization.
grpc::Status RawRun(const std::string& target, const std::string& bytes, std::string* reply) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, "/kerneleval.v1.KernelEval/Run", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  reply->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

// Bytes that are not a RunRequest at all, straight onto the wire.
TEST_F(BadInputTest, UnparseableRequestBytes) {
  // The same path with valid bytes works, so the failures below are about the bytes.
  const RunRequest good = MakeRunRequest(v1::DTYPE_FP16, v1::MODE_OUTPUT, 2, 24, 9);
  std::string reply;
  ASSERT_TRUE(RawRun(server_->target(), good.SerializeAsString(), &reply).ok());
  v1::RunResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(reply));
  EXPECT_EQ(CompareWithLocal(good, parsed), "");

  const std::vector<std::string> payloads = {
      std::string("\x0a\xff\xff\xff\xff\x0f", 6),  // length-delimited field past the end
      std::string("\x0a\x05\x08\x01", 4),          // truncated sub-message
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),  // varint too long
      std::string(64, '\xff'),
      std::string("\x32\x02\xc3\x28", 4),  // device: invalid UTF-8 in a string field
  };
  for (const std::string& bytes : payloads) {
    const grpc::Status status = RawRun(server_->target(), bytes, &reply);
    // gRPC's callback API answers what it cannot parse itself, before our handler runs
    // (UNIMPLEMENTED with no message in gRPC 1.51); any clean error will do.
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNKNOWN) << status.error_message();
    std::cout << "unparseable request: code " << status.error_code() << " '"
              << status.error_message() << "'\n";
    ExpectServesValidRun(bytes.size());
  }
}

}  // namespace
}  // namespace kerneleval::testing
