// Who may read /metrics, from the outside: real servers on loopback scraped over HTTP. Where
// the gRPC port takes bearer tokens, /metrics takes the same tokens and nothing less; with
// basic auth configured as well, either credential serves; with neither, it is open, and then
// it listens on loopback unless told otherwise.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "server/app/server_flags.h"
#include "test_server.h"
#include "two_owners.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Bearer(const std::string& token) { return "Authorization: Bearer " + token + "\r\n"; }

std::string Basic(const std::string& user_password) {
  return "Authorization: Basic " + absl::Base64Escape(user_password) + "\r\n";
}

server::ServerOptions WithTokens() {
  server::ServerOptions o = LoopbackOptions();
  AdmitAliceAndBob(&o);
  return o;
}

bool Served(const std::string& response) {
  return response.find("200 OK") != std::string::npos &&
         response.find("kerneleval_ready") != std::string::npos;
}

bool Refused(const std::string& response) {
  return response.find("401 Unauthorized") != std::string::npos &&
         response.find("kerneleval_") == std::string::npos;
}

TEST(MetricsAccess, TokensOfTheGrpcPortGuardMetricsToo) {
  TestServer t = StartServer(WithTokens(), {}, [] {
    client::ClientOptions c;
    c.bearer_token = kAliceToken;
    return c;
  }());
  ASSERT_NE(t.server, nullptr);
  const int port = t.server->metrics_port();
  const std::string open = ScrapeMetrics(port);
  EXPECT_TRUE(Refused(open)) << open.substr(0, 300);
  EXPECT_THAT(open, HasSubstr("WWW-Authenticate: Bearer"));
  for (const std::string& wrong : {Bearer("alice-SECRET-7f3a9d"), Bearer(""), Bearer("alice"),
                                   Bearer(kAliceToken + std::string("x")),
                                   "Authorization: " + std::string(kAliceToken) + "\r\n",
                                   Basic(std::string("alice:") + kAliceToken)}) {
    SCOPED_TRACE(wrong);
    const std::string refused = ScrapeMetrics(port, wrong);
    EXPECT_TRUE(Refused(refused)) << refused.substr(0, 300);
    EXPECT_THAT(refused, Not(HasSubstr(kAliceToken)));
  }
  // Each owner's token serves; the scheme is case-insensitive (RFC 7235).
  EXPECT_TRUE(Served(ScrapeMetrics(port, Bearer(kAliceToken))));
  EXPECT_TRUE(Served(ScrapeMetrics(port, Bearer(kBobToken))));
  EXPECT_TRUE(
      Served(ScrapeMetrics(port, "Authorization: bearer " + std::string(kBobToken) + "\r\n")));
}

TEST(MetricsAccess, WithBasicAuthToo_EitherCredentialServes) {
  server::ServerOptions o = WithTokens();
  o.metrics_basic_auth = "scraper:pass-3c9e";
  TestServer t = StartServer(o, {}, [] {
    client::ClientOptions c;
    c.bearer_token = kBobToken;
    return c;
  }());
  ASSERT_NE(t.server, nullptr);
  const int port = t.server->metrics_port();
  const std::string open = ScrapeMetrics(port);
  EXPECT_TRUE(Refused(open)) << open.substr(0, 300);
  EXPECT_THAT(open, HasSubstr("WWW-Authenticate: Bearer"));
  EXPECT_THAT(open, HasSubstr("WWW-Authenticate: Basic"));
  EXPECT_TRUE(Served(ScrapeMetrics(port, Basic("scraper:pass-3c9e"))));
  EXPECT_TRUE(Served(ScrapeMetrics(port, Bearer(kBobToken))));
  EXPECT_TRUE(Refused(ScrapeMetrics(port, Basic("scraper:pass-3c9f"))));
  EXPECT_TRUE(Refused(ScrapeMetrics(port, Bearer("pass-3c9e"))));
}

TEST(MetricsAccess, WithoutCredentialsConfiguredItIsOpen) {
  TestServer t = StartServer();
  ASSERT_NE(t.server, nullptr);
  EXPECT_TRUE(Served(ScrapeMetrics(t.server->metrics_port())));
}

TEST(MetricsAccess, ItListensOnLoopbackByDefault) {
  EXPECT_EQ(server::ServerOptions().metrics_listen, "127.0.0.1:9464");
  // And so the command line, with no --metrics-listen.
  std::vector<std::string> args = {"kerneleval-server", "--device", "cpu"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  server::ServerCommandLine parsed;
  ASSERT_FALSE(server::ParseServerCommandLine(static_cast<int>(argv.size()), argv.data(), &parsed)
                   .has_value());
  EXPECT_EQ(parsed.options.metrics_listen, "127.0.0.1:9464");
}

}  // namespace
}  // namespace kerneleval::testing
