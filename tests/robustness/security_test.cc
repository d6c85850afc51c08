// Authentication and transport security of a real server on loopback: the bearer token on
// every RPC but health (KernelEval and reflection), checked before the request message is
// read; TLS and mutual TLS with certificates made at test time by the openssl command line
// tool; and the token kept out of logs and metrics.
#include <chrono>
#include <cstdlib>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/escaping.h"

#include "client/call_completion.h"
#include "kerneleval/v1/results.grpc.pb.h"
#include "robustness_util.h"
#include "server/store/result_store.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

constexpr char kToken[] = "kx-7f3a9c1e5b2d-robustness-token";

// /metrics asks for the token where the gRPC port does (server/app/metrics_gate.h).
std::string BearerAuthorization() {
  return std::string("Authorization: Bearer ") + kToken + "\r\n";
}

client::ClientOptions ClientFor(const TestServer& t) {
  client::ClientOptions o;
  o.target = t.target();
  o.deadline_seconds = 120;  // generous: the calls do real work on a shared machine
  return o;
}

std::unique_ptr<client::KernelEvalClient> Connect(const client::ClientOptions& options) {
  std::unique_ptr<client::KernelEvalClient> c;
  const grpc::Status s = client::KernelEvalClient::Create(options, &c);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return c;
}

grpc::Status SmallRun(const client::KernelEvalClient& c) {
  const v1::RunRequest req = MakeRunRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT, 2, 16, 5);
  v1::RunResponse resp;
  grpc::Status s = c.Run(req, &resp);
  if (s.ok()) {
    const std::string diff = CompareWithReference(req, resp);
    if (!diff.empty()) return grpc::Status(grpc::StatusCode::INTERNAL, diff);
  }
  return s;
}

grpc::Status SmallBenchmark(const client::KernelEvalClient& c) {
  v1::BenchmarkRequest req;
  *req.mutable_custom_suite() = SmallSuite(v1::DTYPE_BF16, {1, 3}, 64);
  req.mutable_protocol()->set_warmup(0);
  req.mutable_protocol()->set_repetitions(2);
  return c.Benchmark(req, nullptr);
}

// Every KernelEval method, named, with its status.
std::vector<std::pair<std::string, grpc::Status>> CallEveryMethod(
    const client::KernelEvalClient& c) {
  std::vector<std::pair<std::string, grpc::Status>> out;
  out.emplace_back("Run", SmallRun(c));
  out.emplace_back("Benchmark", SmallBenchmark(c));
  v1::ListSuitesResponse suites;
  out.emplace_back("ListSuites", c.ListSuites(&suites));
  v1::ListDevicesResponse devices;
  out.emplace_back("ListDevices", c.ListDevices(&devices));
  v1::ListImplementationsResponse impls;
  out.emplace_back("ListImplementations", c.ListImplementations("", &impls));
  return out;
}

// ListDevices with a raw `authorization` value (none when `value` is null).
grpc::Status ListDevicesWithAuthorization(const std::string& target, const char* value) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::KernelEval::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  if (value != nullptr) context.AddMetadata("authorization", value);
  v1::ListDevicesResponse response;
  return stub->ListDevices(&context, v1::ListDevicesRequest(), &response);
}

// Opens a call to `method` with `authorization` (none when null) and sends the metadata but
// never a message. A server that checks the token only once it has the message cannot answer
// before the deadline (kNoMessageDeadlineSeconds); one that checks the metadata answers in
// well under half of it, however loaded the machine.
constexpr int kNoMessageDeadlineSeconds = 60;
grpc::Status CallThatSendsNoMessage(const std::string& target, const std::string& method,
                                    const char* authorization, double* seconds) {
  class Reactor final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    void OnDone(const grpc::Status& s) override { completion_.Done(s); }
    grpc::Status Wait() { return completion_.Wait(); }

   private:
    client::CallCompletion completion_;
  };
  grpc::GenericStub stub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(kNoMessageDeadlineSeconds));
  if (authorization != nullptr) context.AddMetadata("authorization", authorization);
  Reactor reactor;
  const auto t0 = std::chrono::steady_clock::now();
  stub.PrepareBidiStreamingCall(&context, method, grpc::StubOptions(), &reactor);
  reactor.StartCall();
  const grpc::Status status = reactor.Wait();
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return status;
}

class BearerTokenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o = LoopbackOptions();
    o.auth_token = kToken;
    server_ = new TestServer(StartServer(o));
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};
TestServer* BearerTokenTest::server_ = nullptr;

TEST_F(BearerTokenTest, EveryMethodWithoutATokenIsUnauthenticated) {
  ASSERT_NE(server_->server, nullptr);
  auto c = Connect(ClientFor(*server_));
  for (const auto& [method, status] : CallEveryMethod(*c)) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << method << ": " << status.error_message();
    EXPECT_NE(status.error_message().find("authorization"), std::string::npos) << method;
  }
}

TEST_F(BearerTokenTest, EveryMethodWithAWrongTokenIsPermissionDenied) {
  ASSERT_NE(server_->server, nullptr);
  const std::string full = kToken;
  for (const std::string& wrong :
       {std::string("not-the-token"), full.substr(0, full.size() - 1), full + "x",
        std::string(full.size(), 'a'), full.substr(1) + "k"}) {
    SCOPED_TRACE(wrong);
    client::ClientOptions o = ClientFor(*server_);
    o.bearer_token = wrong;
    auto c = Connect(o);
    for (const auto& [method, status] : CallEveryMethod(*c)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << method << ": " << status.error_message();
      // The answer neither echoes what was sent nor reveals the real token.
      EXPECT_EQ(status.error_message().find(wrong), std::string::npos) << method;
      EXPECT_EQ(status.error_message().find(kToken), std::string::npos) << method;
    }
  }
}

TEST_F(BearerTokenTest, MalformedAuthorizationValuesAreRejected) {
  ASSERT_NE(server_->server, nullptr);
  const std::string target = server_->target();
  const std::string token = kToken;
  EXPECT_EQ(ListDevicesWithAuthorization(target, nullptr).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  for (const std::string& value :
       {std::string(""), std::string("Bearer"), std::string("Bearer "), token, "Basic " + token,
        "Bearer  " + token, "Bearer " + token + " ", "bearer" + token, "Token " + token,
        "Bearer " + token + "," + token}) {
    SCOPED_TRACE("authorization: '" + value + "'");
    const grpc::Status s = ListDevicesWithAuthorization(target, value.c_str());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  }
  EXPECT_TRUE(ListDevicesWithAuthorization(target, ("Bearer " + token).c_str()).ok());
}

TEST_F(BearerTokenTest, TheRightTokenIsServed) {
  ASSERT_NE(server_->server, nullptr);
  client::ClientOptions o = ClientFor(*server_);
  o.bearer_token = kToken;
  auto c = Connect(o);
  for (const auto& [method, status] : CallEveryMethod(*c)) {
    EXPECT_TRUE(status.ok()) << method << ": " << status.error_message();
  }
}

TEST_F(BearerTokenTest, HealthNeedsNoToken) {
  ASSERT_NE(server_->server, nullptr);
  auto c = Connect(ClientFor(*server_));
  for (const char* service : {"", "readiness"}) {
    SCOPED_TRACE(service);
    bool serving = false;
    const grpc::Status s = c->HealthCheck(service, &serving);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(serving);
  }
}

TEST_F(BearerTokenTest, ReflectionNeedsTheTokenToo) {
  ASSERT_NE(server_->server, nullptr);
  std::vector<std::string> services;
  const grpc::Status none = Connect(ClientFor(*server_))->ListReflectionServices(&services);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  EXPECT_TRUE(services.empty());
  client::ClientOptions o = ClientFor(*server_);
  o.bearer_token = "not-the-token";
  const grpc::Status wrong = Connect(o)->ListReflectionServices(&services);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::PERMISSION_DENIED) << wrong.error_message();
  o.bearer_token = kToken;
  const grpc::Status right = Connect(o)->ListReflectionServices(&services);
  ASSERT_TRUE(right.ok()) << right.error_message();
  EXPECT_NE(std::find(services.begin(), services.end(), "kerneleval.v1.KernelEval"),
            services.end());

  const std::string metrics = ScrapeMetrics(server_->server->metrics_port(), BearerAuthorization());
  EXPECT_GE(MetricValue(metrics, "kerneleval_rpc_requests_total",
                        {{"method", "ServerReflectionInfo"}, {"code", "UNAUTHENTICATED"}}),
            1);
  EXPECT_GE(MetricValue(metrics, "kerneleval_rpc_requests_total",
                        {{"method", "ServerReflectionInfo"}, {"code", "PERMISSION_DENIED"}}),
            1);
}

// The old check ran in the handlers, which gRPC calls only once the request message has
// arrived: a call that never sends one would wait for its deadline.
TEST_F(BearerTokenTest, CallsAreRefusedBeforeTheRequestMessageIsRead) {
  ASSERT_NE(server_->server, nullptr);
  const std::string wrong = std::string("Bearer ") + kToken + "-wrong";
  for (const char* method : {"/kerneleval.v1.KernelEval/Run", "/kerneleval.v1.KernelEval/Benchmark",
                             "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                             "/no.such.Service/Method"}) {
    SCOPED_TRACE(method);
    double seconds = 0;
    grpc::Status s = CallThatSendsNoMessage(server_->target(), method, nullptr, &seconds);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_LT(seconds, kNoMessageDeadlineSeconds / 2);
    s = CallThatSendsNoMessage(server_->target(), method, wrong.c_str(), &seconds);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_LT(seconds, kNoMessageDeadlineSeconds / 2);
  }
  // Made-up methods do not add label values to the metrics.
  const std::string metrics = ScrapeMetrics(server_->server->metrics_port(), BearerAuthorization());
  EXPECT_EQ(metrics.find("no.such.Service"), std::string::npos);
  EXPECT_GE(MetricValue(metrics, "kerneleval_rpc_requests_total",
                        {{"method", "unknown"}, {"code", "UNAUTHENTICATED"}}),
            1);
}

TEST_F(BearerTokenTest, TheTokenNeverReachesStderrOrMetrics) {
  ASSERT_NE(server_->server, nullptr);
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  StderrCapture capture(dir.File("stderr.txt"));
  {
    client::ClientOptions good = ClientFor(*server_);
    good.bearer_token = kToken;
    client::ClientOptions wrong = ClientFor(*server_);
    wrong.bearer_token = std::string(kToken) + "-wrong";
    for (const auto& o : {ClientFor(*server_), good, wrong}) {
      auto c = Connect(o);
      CallEveryMethod(*c);
      bool serving = false;
      c->HealthCheck("", &serving);
      // A bad request too: error paths are where values tend to get logged.
      v1::RunRequest bad = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 2, 8);
      bad.mutable_residual()->set_dtype(v1::DTYPE_FP16);
      v1::RunResponse resp;
      c->Run(bad, &resp);
    }
  }
  const std::string logged = capture.Stop();
  EXPECT_EQ(logged.find(kToken), std::string::npos) << logged;
  std::cerr << "server stderr during the calls: " << logged.size() << " bytes\n";

  const std::string metrics = ScrapeMetrics(server_->server->metrics_port(), BearerAuthorization());
  ASSERT_NE(metrics.find("200 OK"), std::string::npos) << metrics.substr(0, 200);
  EXPECT_EQ(metrics.find(kToken), std::string::npos);
}

std::string BasicAuthorization(const std::string& user_password) {
  return "Authorization: Basic " + absl::Base64Escape(user_password) + "\r\n";
}

TEST(MetricsBasicAuth, MetricsNeedTheConfiguredUserAndPassword) {
  server::ServerOptions o = LoopbackOptions();
  o.metrics_basic_auth = "scraper:pass:with-colon-7f3a";  // the first colon ends the user
  TestServer t = StartServer(o);
  ASSERT_NE(t.server, nullptr);
  const int port = t.server->metrics_port();

  const std::string open = ScrapeMetrics(port);
  EXPECT_NE(open.find("401 Unauthorized"), std::string::npos) << open.substr(0, 200);
  EXPECT_NE(open.find("WWW-Authenticate: Basic"), std::string::npos) << open.substr(0, 200);
  EXPECT_EQ(open.find("kerneleval_"), std::string::npos);
  for (const std::string& wrong :
       {std::string("scraper:wrong"), std::string("other:pass:with-colon-7f3a"),
        std::string("scraper:pass:with-colon-7f3"), std::string("scraper"), std::string(":"),
        std::string("Scraper:pass:with-colon-7f3a")}) {
    SCOPED_TRACE(wrong);
    const std::string refused = ScrapeMetrics(port, BasicAuthorization(wrong));
    EXPECT_NE(refused.find("401 Unauthorized"), std::string::npos) << refused.substr(0, 200);
    EXPECT_EQ(refused.find("kerneleval_"), std::string::npos);
  }
  const std::string served = ScrapeMetrics(port, BasicAuthorization(o.metrics_basic_auth));
  EXPECT_NE(served.find("200 OK"), std::string::npos) << served.substr(0, 200);
  EXPECT_NE(served.find("kerneleval_ready 1"), std::string::npos);
  // gRPC is unaffected: it has its own (bearer token) setting.
  EXPECT_TRUE(SmallRun(*t.client).ok());
}

TEST(MetricsBasicAuth, SettingWithoutAUserAndPasswordRefusesToStart) {
  for (const char* bad : {"no-colon", ":password-without-user"}) {
    SCOPED_TRACE(bad);
    server::ServerOptions o = LoopbackOptions();
    o.metrics_basic_auth = bad;
    std::vector<std::unique_ptr<server::Backend>> backends;
    backends.push_back(std::make_unique<server::CpuBackend>("cpu"));
    auto started = server::KernelEvalServer::Start(o, std::move(backends));
    ASSERT_FALSE(started.ok());
    EXPECT_NE(started.status().message().find("--metrics-basic-auth-file"), std::string::npos);
    EXPECT_EQ(started.status().message().find(bad), std::string::npos);  // never echoed
  }
}

// A throwaway PKI: a CA, a server certificate for 127.0.0.1 and localhost, a client
// certificate, and a second CA with its own client certificate (trusted by nobody).
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    if (!dir_->ok()) {
      failure_ = "cannot create a temp dir";
      return;
    }
    const std::string openssl = KERNELEVAL_OPENSSL;
    if (openssl.empty()) {
      failure_ = "no openssl command line tool";
      return;
    }
    const std::string d = dir_->path();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    WriteWholeFile(d + "/server.ext",
                   "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n");
    WriteWholeFile(d + "/client.ext", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
    const std::vector<std::string> steps = {
        "req -x509" + key + " -days 2 -subj /CN=kerneleval-test-ca -keyout ca.key -out ca.crt" +
            " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign",
        "req -x509" + key + " -days 2 -subj /CN=other-ca -keyout other-ca.key -out other-ca.crt" +
            " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign",
        "req" + key + " -subj /CN=localhost -keyout server.key -out server.csr",
        "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2"
        " -extfile server.ext -out server.crt",
        "req" + key + " -subj /CN=kerneleval-test-client -keyout client.key -out client.csr",
        "x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2"
        " -extfile client.ext -out client.crt",
        "req" + key + " -subj /CN=intruder -keyout intruder.key -out intruder.csr",
        "x509 -req -in intruder.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial"
        " -days 2 -extfile client.ext -out intruder.crt",
    };
    for (const std::string& step : steps) {
      const std::string cmd = "cd '" + d + "' && '" + openssl + "' " + step + " >>openssl.log 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        failure_ = "openssl failed: " + step + "\n" + ReadWholeFile(d + "/openssl.log");
        return;
      }
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (std::string(KERNELEVAL_OPENSSL).empty()) GTEST_SKIP() << "no openssl command line tool";
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  static std::string File(const char* name) { return dir_->File(name); }

  static server::ServerOptions TlsOptions(bool mutual) {
    server::ServerOptions o = LoopbackOptions();
    o.tls_cert_file = File("server.crt");
    o.tls_key_file = File("server.key");
    if (mutual) o.tls_client_ca_file = File("ca.crt");
    return o;
  }

  static client::ClientOptions TlsClient(const TestServer& t) {
    client::ClientOptions o = ClientFor(t);
    o.tls = true;
    o.tls_ca_file = File("ca.crt");
    return o;
  }

  static TempDir* dir_;
  static std::string failure_;
};
TempDir* TlsTest::dir_ = nullptr;
std::string TlsTest::failure_;

TEST_F(TlsTest, TlsClientIsServedOnTheIpAndOnLocalhost) {
  TestServer t = StartServer(TlsOptions(false));
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions o = TlsClient(t);
  EXPECT_TRUE(SmallRun(*Connect(o)).ok());
  o.target = "localhost:" + std::to_string(t.server->grpc_port());
  const grpc::Status s = SmallRun(*Connect(o));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(SmallBenchmark(*Connect(o)).ok());
}

TEST_F(TlsTest, PlaintextClientAgainstTlsServerFails) {
  TestServer t = StartServer(TlsOptions(false));
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions o = ClientFor(t);
  o.deadline_seconds = 60;
  const grpc::Status s = SmallRun(*Connect(o));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  bool serving = false;
  EXPECT_FALSE(Connect(o)->HealthCheck("", &serving).ok());
}

TEST_F(TlsTest, ClientRejectsAServerItCannotVerify) {
  TestServer t = StartServer(TlsOptions(false));
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions untrusting = TlsClient(t);
  untrusting.deadline_seconds = 60;
  untrusting.tls_ca_file = File("other-ca.crt");
  EXPECT_EQ(SmallRun(*Connect(untrusting)).error_code(), grpc::StatusCode::UNAVAILABLE);
  client::ClientOptions wrong_name = TlsClient(t);
  wrong_name.deadline_seconds = 60;
  wrong_name.tls_server_name = "not-this-server.example";
  EXPECT_EQ(SmallRun(*Connect(wrong_name)).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRejectsClientsWithoutATrustedCertificate) {
  TestServer t = StartServer(TlsOptions(true));
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions no_cert = TlsClient(t);
  no_cert.deadline_seconds = 60;
  const grpc::Status s = SmallRun(*Connect(no_cert));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  bool serving = false;
  EXPECT_FALSE(Connect(no_cert)->HealthCheck("", &serving).ok());

  client::ClientOptions intruder = no_cert;
  intruder.tls_cert_file = File("intruder.crt");
  intruder.tls_key_file = File("intruder.key");
  EXPECT_EQ(SmallRun(*Connect(intruder)).error_code(), grpc::StatusCode::UNAVAILABLE);

  client::ClientOptions with_cert = TlsClient(t);
  with_cert.tls_cert_file = File("client.crt");
  with_cert.tls_key_file = File("client.key");
  const grpc::Status ok = SmallRun(*Connect(with_cert));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_TRUE(Connect(with_cert)->HealthCheck("", &serving).ok());
  EXPECT_TRUE(serving);
}

TEST_F(TlsTest, TokenAndMutualTlsTogether) {
  server::ServerOptions so = TlsOptions(true);
  so.auth_token = kToken;
  TestServer t = StartServer(so);
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions o = TlsClient(t);
  o.tls_cert_file = File("client.crt");
  o.tls_key_file = File("client.key");
  EXPECT_EQ(SmallRun(*Connect(o)).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  o.bearer_token = "wrong";
  EXPECT_EQ(SmallRun(*Connect(o)).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  std::vector<std::string> services;
  EXPECT_EQ(Connect(o)->ListReflectionServices(&services).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  o.bearer_token = kToken;
  EXPECT_TRUE(SmallRun(*Connect(o)).ok());
  EXPECT_TRUE(Connect(o)->ListReflectionServices(&services).ok());
  o.bearer_token.clear();
  EXPECT_EQ(Connect(o)->ListReflectionServices(&services).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  bool serving = false;
  const grpc::Status health = Connect(o)->HealthCheck("readiness", &serving);
  EXPECT_TRUE(health.ok()) << health.error_message();
  EXPECT_TRUE(serving);
}

// Under mutual TLS the owner is "cert:" and the client certificate's subject DN (RFC 2253),
// not its first SAN or CN: results planted for both spellings, only the subject's are seen.
TEST_F(TlsTest, MutualTlsOwnerIsTheCertificateSubject) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  {
    server::store::StoreOptions so;
    so.data_dir = dir.path();
    auto store = server::store::ResultStore::Open(so, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    for (const auto& [implementation, owner] : std::vector<std::pair<std::string, std::string>>{
             {"sub-aaaaaaaaaaaaaaaaaaaaaaaa", "cert:CN=kerneleval-test-client"},
             {"sub-bbbbbbbbbbbbbbbbbbbbbbbb", "cert:kerneleval-test-client"},
             {"sub-cccccccccccccccccccccccc", "anonymous"}}) {
      v1::BenchmarkReport report;
      report.set_suite("owners");
      v1::WorkloadResult* r = report.add_results();
      r->set_workload("w");
      r->set_implementation(implementation);
      r->set_status(v1::RESULT_STATUS_PASSED);
      ASSERT_TRUE((*store)->RecordNow(report, 1000, owner).ok());
    }
  }
  server::ServerOptions so = TlsOptions(true);
  so.results.data_dir = dir.path();
  TestServer t = StartServer(so);
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions o = TlsClient(t);
  o.tls_cert_file = File("client.crt");
  o.tls_key_file = File("client.key");
  std::shared_ptr<grpc::Channel> channel;
  ASSERT_TRUE(client::MakeChannel(o, &channel).ok());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::HistoryRequest request;
  request.mutable_filter()->set_suite("owners");
  v1::HistoryResponse history;
  const grpc::Status s = v1::Results::NewStub(channel)->History(&context, request, &history);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(history.results_size(), 1);
  EXPECT_EQ(history.results(0).result().implementation(), "sub-aaaaaaaaaaaaaaaaaaaaaaaa");
}

TEST_F(TlsTest, IncompleteOrUnreadableTlsSettingsRefuseToStart) {
  struct Case {
    const char* name;
    std::string cert, key, client_ca;
  };
  const std::vector<Case> cases = {
      {"cert without key", File("server.crt"), "", ""},
      {"key without cert", "", File("server.key"), ""},
      {"client CA without cert", "", "", File("ca.crt")},
      {"missing cert file", File("absent.crt"), File("server.key"), ""},
      {"missing client CA file", File("server.crt"), File("server.key"), File("absent.crt")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    server::ServerOptions o = LoopbackOptions();
    o.tls_cert_file = c.cert;
    o.tls_key_file = c.key;
    o.tls_client_ca_file = c.client_ca;
    std::vector<std::unique_ptr<server::Backend>> backends;
    backends.push_back(std::make_unique<server::CpuBackend>("cpu"));
    auto started = server::KernelEvalServer::Start(o, std::move(backends));
    EXPECT_FALSE(started.ok());
  }
}

TEST_F(TlsTest, GarbageCertificateNeverServesPlaintext) {
  WriteWholeFile(File("garbage.crt"), "-----BEGIN CERTIFICATE-----\nnot a certificate\n");
  server::ServerOptions o = LoopbackOptions();
  o.tls_cert_file = File("garbage.crt");
  o.tls_key_file = File("server.key");
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu"));
  auto started = server::KernelEvalServer::Start(o, std::move(backends));
  if (!started.ok()) return;  // Refusing to start is the best answer.
  client::ClientOptions plain;
  plain.target = "127.0.0.1:" + std::to_string((*started)->grpc_port());
  plain.deadline_seconds = 60;
  EXPECT_FALSE(SmallRun(*Connect(plain)).ok());
}

}  // namespace
}  // namespace kerneleval::testing
