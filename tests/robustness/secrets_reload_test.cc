// Secrets rotated under a running server, the way a Kubernetes Secret volume does it (the
// files are symlinks through `..data`, and a rotation swaps that link to a new directory):
// the token file and the TLS certificate are taken without a restart, a token file that does
// not parse keeps the old tokens, and calls keep working throughout.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "robustness_util.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool Eventually(const std::function<bool()>& check,
                std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return check();
}

// A Secret volume in `root`: `<name>` -> `..data/<name>`, `..data` -> a versioned directory.
class SecretVolume {
 public:
  explicit SecretVolume(std::string root) : root_(std::move(root)) {}

  // Writes a new version holding `files` (name -> bytes) and swaps `..data` to it at once.
  bool Publish(const std::vector<std::pair<std::string, std::string>>& files) {
    const std::string version = "..v" + std::to_string(++versions_);
    if (mkdir((root_ + "/" + version).c_str(), 0700) != 0) return false;
    for (const auto& [name, bytes] : files) {
      if (!WriteWholeFile(root_ + "/" + version + "/" + name, bytes)) return false;
      const std::string link = root_ + "/" + name;
      if (access(link.c_str(), F_OK) != 0 &&
          symlink(("..data/" + name).c_str(), link.c_str()) != 0) {
        return false;
      }
    }
    const std::string tmp = root_ + "/..data_tmp";
    unlink(tmp.c_str());
    return symlink(version.c_str(), tmp.c_str()) == 0 &&
           std::rename(tmp.c_str(), (root_ + "/..data").c_str()) == 0;
  }
  std::string Path(const std::string& name) const { return root_ + "/" + name; }

 private:
  std::string root_;
  int versions_ = 0;
};

grpc::Status ListWith(const TestServer& t, const std::string& token) {
  client::ClientOptions o;
  o.target = t.target();
  o.deadline_seconds = 30;
  o.bearer_token = token;
  std::unique_ptr<client::KernelEvalClient> c;
  EXPECT_TRUE(client::KernelEvalClient::Create(o, &c).ok());
  v1::ListDevicesResponse devices;
  return c->ListDevices(&devices);
}

TEST(SecretsReload, ARotatedTokenFileIsTakenAndABrokenOneKeepsTheOldTokens) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  SecretVolume volume(dir.path());
  const std::string v1_text = "alice:old-token-7f3a9c21\n";
  ASSERT_TRUE(volume.Publish({{"tokens", v1_text}}));
  server::ServerOptions o = LoopbackOptions();
  o.auth_token = v1_text;
  o.auth_token_file = volume.Path("tokens");
  o.secrets_poll_seconds = 0.1;
  TestServer t = StartServer(o);
  ASSERT_NE(t.server, nullptr);
  EXPECT_TRUE(ListWith(t, "old-token-7f3a9c21").ok());
  EXPECT_EQ(ListWith(t, "new-token-b81d44e0").error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Rotated: the old token is refused and the new one accepted, with no restart.
  ASSERT_TRUE(volume.Publish({{"tokens", "alice:new-token-b81d44e0\nbob:bob-token-c9e2f5a3\n"}}));
  EXPECT_TRUE(Eventually([&] {
    return ListWith(t, "old-token-7f3a9c21").error_code() == grpc::StatusCode::PERMISSION_DENIED;
  }));
  EXPECT_TRUE(ListWith(t, "new-token-b81d44e0").ok());
  EXPECT_TRUE(ListWith(t, "bob-token-c9e2f5a3").ok());

  // A file that does not parse (a token with a space, an empty file) changes nothing.
  ASSERT_TRUE(volume.Publish({{"tokens", "alice:broken token\n"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // several polls
  ASSERT_TRUE(volume.Publish({{"tokens", ""}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_TRUE(ListWith(t, "new-token-b81d44e0").ok());
  EXPECT_TRUE(ListWith(t, "bob-token-c9e2f5a3").ok());
  EXPECT_EQ(ListWith(t, "old-token-7f3a9c21").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ListWith(t, "broken").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ListWith(t, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // And the next good file is taken again.
  ASSERT_TRUE(volume.Publish({{"tokens", "alice:third-token-04a6e9d7\n"}}));
  EXPECT_TRUE(Eventually([&] { return ListWith(t, "third-token-04a6e9d7").ok(); }));
  EXPECT_EQ(ListWith(t, "new-token-b81d44e0").error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

// Two server certificates of one CA, told apart by their CN.
class TlsRotation : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string openssl = KERNELEVAL_OPENSSL;
    if (openssl.empty()) GTEST_SKIP() << "no openssl command line tool";
    ASSERT_TRUE(pki_.ok());
    const std::string d = pki_.path();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    ASSERT_TRUE(WriteWholeFile(d + "/server.ext",
                               "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                               "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"));
    std::vector<std::string> steps = {
        "req -x509" + key + " -days 2 -subj /CN=rotation-ca -keyout ca.key -out ca.crt" +
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign"};
    for (const char* n : {"one", "two"}) {
      const std::string name = n;
      steps.push_back("req" + key + " -subj /CN=server-" + name + " -keyout " + name +
                      ".key -out " + name + ".csr");
      steps.push_back("x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial" +
                      " -days 2 -extfile server.ext -out " + name + ".crt");
    }
    for (const std::string& step : steps) {
      const std::string cmd = "cd '" + d + "' && '" + openssl + "' " + step + " >>openssl.log 2>&1";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << step << "\n" << ReadWholeFile(d + "/openssl.log");
    }
  }

  std::string Pem(const std::string& name) const { return ReadWholeFile(pki_.File(name)); }

  // The CN of the certificate a new TLS connection to `t` is served, after a call on it
  // (ListDevices with `token`) succeeded; empty when the call failed.
  std::string ServedCommonName(const TestServer& t, const std::string& token) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Pem("ca.crt");
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    auto stub = v1::KernelEval::NewStub(
        grpc::CreateCustomChannel(t.target(), grpc::SslCredentials(ssl), args));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::ListDevicesRequest request;
    v1::ListDevicesResponse response;
    if (!stub->ListDevices(&context, request, &response).ok()) return "";
    const auto auth = context.auth_context();
    if (auth == nullptr) return "";
    for (const auto& cn : auth->FindPropertyValues("x509_common_name")) {
      return std::string(cn.data(), cn.size());
    }
    return "";
  }

  void CheckRotation(bool with_token) {
    TempDir secret;
    ASSERT_TRUE(secret.ok());
    SecretVolume volume(secret.path());
    ASSERT_TRUE(volume.Publish({{"tls.crt", Pem("one.crt")}, {"tls.key", Pem("one.key")}}));
    server::ServerOptions o = LoopbackOptions();
    o.tls_cert_file = volume.Path("tls.crt");
    o.tls_key_file = volume.Path("tls.key");
    o.secrets_poll_seconds = 0.1;  // gRPC's file watcher checks every second at most
    const std::string token = with_token ? "tls-token-5e7c1b93" : "";
    if (with_token) o.auth_token = "alice:" + token + "\n";
    TestServer t;
    auto started = server::KernelEvalServer::Start(o);
    ASSERT_TRUE(started.ok()) << started.status();
    t.server = std::move(*started);
    ASSERT_TRUE(t.server->WaitUntilReady(absl::Seconds(60)));
    EXPECT_EQ(ServedCommonName(t, token), "server-one");

    // A connection opened before the rotation, kept open through it.
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Pem("ca.crt");
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto old_stub = v1::KernelEval::NewStub(
        grpc::CreateCustomChannel(t.target(), grpc::SslCredentials(ssl), args));
    auto list_on_old = [&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
      v1::ListDevicesResponse response;
      return old_stub->ListDevices(&context, v1::ListDevicesRequest(), &response);
    };
    ASSERT_TRUE(list_on_old().ok());

    ASSERT_TRUE(volume.Publish({{"tls.crt", Pem("two.crt")}, {"tls.key", Pem("two.key")}}));
    std::string seen;
    EXPECT_TRUE(Eventually([&] {
      seen = ServedCommonName(t, token);
      return seen == "server-two";
    })) << "a new connection was served "
        << seen;
    const grpc::Status kept = list_on_old();
    EXPECT_TRUE(kept.ok()) << kept.error_message();
  }

  TempDir pki_;
};

TEST_F(TlsRotation, ANewConnectionGetsTheRotatedCertificate) { CheckRotation(false); }

TEST_F(TlsRotation, ANewConnectionGetsTheRotatedCertificateWithTokens) { CheckRotation(true); }

}  // namespace
}  // namespace kerneleval::testing
