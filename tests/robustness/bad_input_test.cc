// Catalogues of malformed requests, each with the exact status code and the field its
// message must name; after every one the server must still compute a valid Run correctly.
// The Run catalogue is shared with the command line test (bad_run_catalogue.h). The server
// runs with its small limits (CatalogueServerOptions) so that the limit errors are cheap to
// provoke.
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>
#include <utility>

#include "bad_run_catalogue.h"
#include "raw_call.h"
#include "robustness_util.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using v1::BenchmarkRequest;
using v1::RunRequest;

struct BadBenchmark {
  const char* name;
  std::function<void(BenchmarkRequest*)> mutate;
  grpc::StatusCode code;
  const char* field;
  std::size_t max_message_bytes = 0;  // as in BadRunCase
  const char* also = "";
  double deadline_seconds = 0;
};

// The code, the field, and for hostile input a bounded message that quotes the length.
template <typename Case>
void ExpectAnswer(const Case& c, const grpc::Status& s) {
  EXPECT_EQ(s.error_code(), c.code) << s.error_message().substr(0, 2048);
  EXPECT_NE(s.error_message().find(c.field), std::string::npos)
      << s.error_message().substr(0, 2048);
  if (c.max_message_bytes > 0) {
    EXPECT_LT(s.error_message().size(), c.max_message_bytes);
  }
  EXPECT_NE(s.error_message().find(c.also), std::string::npos) << s.error_message().substr(0, 2048);
}

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(StartServer(CatalogueServerOptions())); }
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
    EXPECT_EQ(CompareWithReference(good, resp), "");
  }

  static TestServer* server_;
};
TestServer* BadInputTest::server_ = nullptr;

TEST_F(BadInputTest, MalformedRunRequests) {
  const std::vector<BadRunCase> cases = BadRunCatalogue();
  const RunRequest base = CatalogueBaseRequest();
  std::uint64_t seed = 100;
  for (const BadRunCase& c : cases) {
    SCOPED_TRACE(c.name);
    RunRequest bad = base;
    c.mutate(&bad);
    v1::RunResponse resp;
    const grpc::Status s = c.deadline_seconds > 0
                               ? ClientWithDeadline(c.deadline_seconds)->Run(bad, &resp)
                               : server_->client->Run(bad, &resp);
    ExpectAnswer(c, s);
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
      {"10 KB suite name",
       [](BenchmarkRequest* r) {
         r->clear_custom_suite();
         r->set_suite(std::string(10240, 's'));
       },
       Code::NOT_FOUND, "suite", 1024, "10240"},
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
      {"checked calls on the CPU",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_check_every_call(true); },
       Code::INVALID_ARGUMENT, "protocol.check_every_call"},
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
      {"10 KB implementation name",
       [](BenchmarkRequest* r) { r->add_implementations(std::string(10240, 'i')); },
       Code::NOT_FOUND, "implementations[0]", 1024, "10240"},
      {"10 KB device name", [](BenchmarkRequest* r) { r->set_device(std::string(10240, 'z')); },
       Code::NOT_FOUND, "device", 1024, "10240"},
      {"deadline of 1 ns",
       [](BenchmarkRequest* r) { r->mutable_protocol()->set_repetitions(5000); },
       Code::DEADLINE_EXCEEDED, "", 0, "", 1e-9},
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
    ExpectAnswer(c, s);
    // A request refused by validation streams nothing. One that only runs out of time may
    // have started first: the deadline reaches the server as a grpc-timeout header whose
    // precision gRPC rounds up, so the server can admit it and send a first event before
    // the deadline passes (seen once in 15 runs on two cores).
    if (c.deadline_seconds == 0) EXPECT_EQ(events, 0);
    ExpectServesValidRun(++seed);
  }
  std::cout << cases.size() << " malformed Benchmark requests rejected\n";
}

constexpr char kRunMethod[] = "/kerneleval.v1.KernelEval/Run";
constexpr char kBenchmarkMethod[] = "/kerneleval.v1.KernelEval/Benchmark";

// Bytes that are not the request message at all, straight onto the wire: INVALID_ARGUMENT
// naming the method, for Run and for Benchmark (gRPC's own parse would answer UNIMPLEMENTED
// with no message).
TEST_F(BadInputTest, UnparseableRequestBytesAreInvalidArgumentNamingTheMethod) {
  // The same path with valid bytes works, so the failures below are about the bytes.
  const RunRequest good = MakeRunRequest(v1::DTYPE_FP16, v1::MODE_OUTPUT, 2, 24, 9);
  std::string reply;
  ASSERT_TRUE(RawCall(server_->target(), kRunMethod, good.SerializeAsString(), &reply).ok());
  v1::RunResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(reply));
  EXPECT_EQ(CompareWithReference(good, parsed), "");

  const std::vector<std::string> payloads = MalformedBodies();
  const std::vector<std::pair<const char*, const char*>> methods = {
      {kRunMethod, "Run"}, {kBenchmarkMethod, "Benchmark"}};
  for (const auto& [method, name] : methods) {
    for (const std::string& bytes : payloads) {
      SCOPED_TRACE(std::string(name) + ", " + std::to_string(bytes.size()) + " bytes");
      const grpc::Status status = RawCall(server_->target(), method, bytes, &reply);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_NE(status.error_message().find(name), std::string::npos) << status.error_message();
      ExpectServesValidRun(bytes.size());
    }
  }
}

// A RunRequest whose `device` (field 6, a proto3 string) is not valid UTF-8, encoded by hand:
// the message does not parse, and the answer says so.
TEST_F(BadInputTest, InvalidUtf8InAStringFieldIsInvalidArgument) {
  RunRequest good = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 2, 8, 13);
  good.set_device("cpu");
  std::string reply;
  ASSERT_TRUE(RawCall(server_->target(), kRunMethod, good.SerializeAsString(), &reply).ok());

  const google::protobuf::FieldDescriptor* device =
      RunRequest::descriptor()->FindFieldByName("device");
  ASSERT_NE(device, nullptr);
  ASSERT_EQ(device->type(), google::protobuf::FieldDescriptor::TYPE_STRING);
  ASSERT_LT(device->number(), 16);  // a one-byte tag
  good.clear_device();
  std::string bytes = good.SerializeAsString();
  bytes += static_cast<char>(device->number() << 3 | 2);  // wire type 2: length-delimited
  bytes += std::string(
      "\x04"
      "c\xc3\x28u",
      5);  // 0xc3 0x28: not UTF-8
  // Client faults are logged at most 5 a second: an earlier test in this process may have
  // used up the current second's lines.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ::testing::internal::CaptureStderr();
  const grpc::Status status = RawCall(server_->target(), kRunMethod, bytes, &reply);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("Run"), std::string::npos) << status.error_message();
  // A client's bad bytes are its fault: logged at INFO (rate-limited), never as an ERROR.
  EXPECT_EQ(log.find("ERROR"), std::string::npos) << log;
  EXPECT_NE(log.find("client fault"), std::string::npos) << log;
  ExpectServesValidRun(77);
}

}  // namespace
}  // namespace kerneleval::testing
