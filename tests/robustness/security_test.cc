// Authentication and transport security of a real server on loopback: the bearer token on
// every KernelEval RPC (health stays open), TLS and mutual TLS with certificates made at
// test time by the openssl command line tool, and the token kept out of logs and metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

#include "robustness_util.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

constexpr char kToken[] = "kx-7f3a9c1e5b2d-robustness-token";

client::ClientOptions ClientFor(const TestServer& t) {
  client::ClientOptions o;
  o.target = t.target();
  o.deadline_seconds = 20;
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
    const std::string diff = CompareWithLocal(req, resp);
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
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (value != nullptr) context.AddMetadata("authorization", value);
  v1::ListDevicesResponse response;
  return stub->ListDevices(&context, v1::ListDevicesRequest(), &response);
}

// GET /metrics over plain HTTP/1.0; empty on any failure.
std::string ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) body.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return body;
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

  const std::string metrics = ScrapeMetrics(server_->server->metrics_port());
  ASSERT_NE(metrics.find("200 OK"), std::string::npos) << metrics.substr(0, 200);
  EXPECT_EQ(metrics.find(kToken), std::string::npos);
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
  o.deadline_seconds = 5;
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
  untrusting.deadline_seconds = 5;
  untrusting.tls_ca_file = File("other-ca.crt");
  EXPECT_EQ(SmallRun(*Connect(untrusting)).error_code(), grpc::StatusCode::UNAVAILABLE);
  client::ClientOptions wrong_name = TlsClient(t);
  wrong_name.deadline_seconds = 5;
  wrong_name.tls_server_name = "not-this-server.example";
  EXPECT_EQ(SmallRun(*Connect(wrong_name)).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRejectsClientsWithoutATrustedCertificate) {
  TestServer t = StartServer(TlsOptions(true));
  ASSERT_NE(t.server, nullptr);
  client::ClientOptions no_cert = TlsClient(t);
  no_cert.deadline_seconds = 5;
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
  o.bearer_token = kToken;
  EXPECT_TRUE(SmallRun(*Connect(o)).ok());
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
  plain.deadline_seconds = 5;
  EXPECT_FALSE(SmallRun(*Connect(plain)).ok());
}

}  // namespace
}  // namespace kerneleval::testing
