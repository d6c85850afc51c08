// Fan-out and Pushgateway pieces without servers: target expansion (with a stand-in resolver
// and with the system's for "localhost"), the merged report formats, exit codes, and the
// metrics a push sends.
#include "client/fanout.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/exit_codes.h"
#include "client/push.h"

namespace kerneleval::client {
namespace {

TEST(SplitHostPort, Forms) {
  auto hp = SplitHostPort("svc.ns.svc.cluster.local:50051");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "svc.ns.svc.cluster.local");
  EXPECT_EQ(hp->port, "50051");
  hp = SplitHostPort("[fd00::1]:8080");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "fd00::1");
  EXPECT_EQ(hp->port, "8080");
  for (const char* bad : {"svc", "svc:", "svc:http", "fd00::1:80", "dns:///svc:50051",
                          "unix:/tmp/sock", "[fd00::1]", "[fd00::1]80", ":50051"}) {
    EXPECT_FALSE(SplitHostPort(bad)) << bad;
  }
  EXPECT_EQ(JoinHostPort("10.0.0.1", "1"), "10.0.0.1:1");
  EXPECT_EQ(JoinHostPort("::1", "1"), "[::1]:1");
}

absl::StatusOr<std::vector<std::string>> FakeResolve(const std::string& host,
                                                     const std::string& port) {
  if (host == "headless") {
    return std::vector<std::string>{"10.0.0.1:" + port, "10.0.0.2:" + port, "[fd00::3]:" + port};
  }
  if (host == "single") return std::vector<std::string>{"10.0.0.9:" + port};
  if (host == "loop") return std::vector<std::string>{"127.0.0.1:" + port, "[::1]:" + port};
  return absl::UnavailableError("no such host");
}

TEST(ExpandTargets, EveryAddressOfANameBecomesATarget) {
  const std::vector<BenchTarget> t = ExpandTargets({"headless:50051"}, FakeResolve);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].address, "10.0.0.1:50051");
  EXPECT_EQ(t[1].address, "10.0.0.2:50051");
  EXPECT_EQ(t[2].address, "[fd00::3]:50051");
  for (const BenchTarget& b : t) EXPECT_EQ(b.server_name, "headless");
}

TEST(ExpandTargets, OtherFormsStayAsGiven) {
  const std::vector<BenchTarget> t =
      ExpandTargets({"single:1", "loop:2", "nowhere:3", "10.0.0.1:4", "[fd00::1]:5",
                     "dns:///headless:50051", "single:1", "headless:6"},
                    FakeResolve);
  std::vector<std::string> addresses;
  for (const BenchTarget& b : t) addresses.push_back(b.address);
  EXPECT_EQ(addresses, (std::vector<std::string>{"single:1", "loop:2", "nowhere:3", "10.0.0.1:4",
                                                 "[fd00::1]:5", "dns:///headless:50051",
                                                 "10.0.0.1:6", "10.0.0.2:6", "[fd00::3]:6"}));
  EXPECT_EQ(t[0].server_name, "");
}

// Independent of the code under test: what getaddrinfo says about `host`.
std::set<std::string> SystemAddresses(const char* host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::set<std::string> out;
  if (getaddrinfo(host, "50051", &hints, &list) != 0) return out;
  for (addrinfo* a = list; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
      out.insert(std::string(text) + ":50051");
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                sizeof(text));
      out.insert("[" + std::string(text) + "]:50051");
    }
  }
  freeaddrinfo(list);
  return out;
}

TEST(ResolveTargets, LocalhostEachAddressIsATarget) {
  const std::set<std::string> expected = SystemAddresses("localhost");
  if (expected.empty()) GTEST_SKIP() << "localhost does not resolve here";
  absl::StatusOr<std::vector<std::string>> got = ResolveTargets("localhost", "50051");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::set<std::string>(got->begin(), got->end()), expected);
  EXPECT_EQ(got->size(), expected.size());  // No duplicates.
  for (const std::string& target : *got) {
    auto hp = SplitHostPort(target);
    ASSERT_TRUE(hp) << target;
    EXPECT_TRUE(IsIpLiteral(hp->host)) << target;
  }
  // Loopback names stay one target: the default localhost:50051 behaves as it always did.
  const std::vector<BenchTarget> t = ExpandTargets({"localhost:50051"});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].address, "localhost:50051");
  EXPECT_FALSE(ResolveTargets("no-such-host.invalid", "1").ok());
}

v1::BenchmarkReport SampleReport(const std::string& device, bool correct) {
  v1::BenchmarkReport report;
  report.set_suite("fused_add_rmsnorm_h2048");
  report.set_complete(true);
  v1::WorkloadResult* r = report.add_results();
  r->set_workload("batch_size=1");
  (*r->mutable_axes())["batch_size"] = 1;
  (*r->mutable_axes())["hidden_size"] = 2048;
  r->set_implementation("cpu_fused");
  r->set_device(device);
  r->set_status(correct ? v1::RESULT_STATUS_PASSED : v1::RESULT_STATUS_INCORRECT);
  r->mutable_latency()->set_median_seconds(2e-6);
  r->set_bytes_moved(12288 + 4096);
  r->set_bytes_per_second(8.192e9);
  v1::SolFigure* f = r->add_sol();
  f->set_source(v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
  f->set_sol_ratio(0.25);
  r->mutable_correctness()->set_checked(true);
  r->mutable_correctness()->set_passed(correct);
  r->set_rank(correct ? 1 : 0);
  v1::ImplementationSummary* s = report.add_summaries();
  s->set_implementation("cpu_fused");
  s->set_device(device);
  s->set_rank(1);
  s->set_mean_latency_seconds(2e-6);
  s->set_geomean_sol_ratio(0.25);
  s->set_passed(correct ? 1 : 0);
  s->set_failed(correct ? 0 : 1);
  v1::Environment* env = report.add_environments();
  env->mutable_device()->set_name(device);
  env->mutable_device()->set_model("Test CPU");
  env->set_hostname("node-a");
  return report;
}

std::vector<TargetResult> SampleResults() {
  std::vector<TargetResult> results(3);
  results[0].target = "10.0.0.1:50051";
  results[0].report = SampleReport("cpu", true);
  results[1].target = "10.0.0.2:50051";
  results[1].status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused");
  results[2].target = "10.0.0.3:50051";
  results[2].report = SampleReport("cuda:0", true);
  results[2].report.set_run_id("run-3");
  return results;
}

TEST(FormatFanOut, Json) {
  absl::StatusOr<std::string> text = FormatFanOut(SampleResults(), ReportFormat::kJson);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json doc = nlohmann::json::parse(*text);
  ASSERT_EQ(doc["targets"].size(), 3u);
  EXPECT_EQ(doc["targets"][0]["target"], "10.0.0.1:50051");
  EXPECT_EQ(doc["targets"][0]["status"], "OK");
  EXPECT_EQ(doc["targets"][0]["report"]["suite"], "fused_add_rmsnorm_h2048");
  EXPECT_EQ(doc["targets"][0]["report"]["results"][0]["implementation"], "cpu_fused");
  EXPECT_EQ(doc["targets"][1]["status"], "UNAVAILABLE: connection refused");
  EXPECT_TRUE(doc["targets"][1]["report"].is_null());
  const nlohmann::json& summary = doc["summary"];
  EXPECT_EQ(summary["targets"], 3);
  EXPECT_EQ(summary["succeeded"], 2);
  EXPECT_EQ(summary["failed"], 1);
  ASSERT_EQ(summary["implementations"].size(), 2u);
  EXPECT_EQ(summary["implementations"][1]["target"], "10.0.0.3:50051");
  EXPECT_EQ(summary["implementations"][1]["device"], "cuda:0");
  EXPECT_EQ(summary["implementations"][1]["model"], "Test CPU");
  EXPECT_EQ(summary["implementations"][1]["hostname"], "node-a");
  EXPECT_DOUBLE_EQ(summary["implementations"][1]["geomean_sol_ratio"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(summary["implementations"][1]["mean_latency_seconds"].get<double>(), 2e-6);
}

TEST(FormatFanOut, TableAndCsv) {
  const std::vector<TargetResult> results = SampleResults();
  absl::StatusOr<std::string> table = FormatFanOut(results, ReportFormat::kTable);
  ASSERT_TRUE(table.ok());
  EXPECT_NE(table->find("=== 10.0.0.1:50051: OK ==="), std::string::npos) << *table;
  EXPECT_NE(table->find(FormatReportTable(results[0].report)), std::string::npos);
  EXPECT_NE(table->find("=== summary: 2 of 3 targets succeeded ==="), std::string::npos);
  EXPECT_NE(table->find("geomean SOL %"), std::string::npos);
  EXPECT_NE(table->find("25.0"), std::string::npos);
  EXPECT_NE(table->find("errors:\n  10.0.0.2:50051: UNAVAILABLE: connection refused"),
            std::string::npos);

  absl::StatusOr<std::string> csv = FormatFanOut(results, ReportFormat::kCsv);
  ASSERT_TRUE(csv.ok());
  const std::string single = FormatReportCsv(results[0].report);
  const std::string header = single.substr(0, single.find('\n'));
  EXPECT_EQ(csv->substr(0, csv->find('\n')), "target," + header);
  // A report that was not stored has an empty run_id; a stored one names its run.
  EXPECT_NE(csv->find("\n10.0.0.1:50051,,fused_add_rmsnorm_h2048,"), std::string::npos) << *csv;
  EXPECT_NE(csv->find("\n10.0.0.3:50051,run-3,fused_add_rmsnorm_h2048,"), std::string::npos)
      << *csv;
  EXPECT_EQ(csv->find("10.0.0.2"), std::string::npos);
  EXPECT_FALSE(FormatFanOut(results, ReportFormat::kHtml).ok());
}

TEST(FanOutExitCode, RpcErrorThenIncorrectThenOk) {
  std::vector<TargetResult> results = SampleResults();
  EXPECT_EQ(FanOutExitCode(results), kExitInfrastructure);
  results[1].status = grpc::Status::OK;
  results[1].report = SampleReport("cpu", false);
  EXPECT_EQ(FanOutExitCode(results), kExitIncorrect);
  results[1].report = SampleReport("cpu", true);
  EXPECT_EQ(FanOutExitCode(results), kExitOk);
}

TEST(Pushgateway, Url) {
  absl::StatusOr<PushgatewayAddress> a = ParsePushgatewayUrl("http://127.0.0.1:9091");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "http://127.0.0.1");
  EXPECT_EQ(a->port, "9091");
  a = ParsePushgatewayUrl("https://[fd00::1]/");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "https://[fd00::1]");
  EXPECT_EQ(a->port, "443");
  for (const char* bad : {"127.0.0.1:9091", "ftp://h:1", "http://", "http://h:0", "http://h:x",
                          "http://h:1/prefix", "http://u@h:1", "http://fd00::1:80"}) {
    EXPECT_FALSE(ParsePushgatewayUrl(bad).ok()) << bad;
  }
  EXPECT_TRUE(IsValidPushJob("kerneleval-benchmark"));
  EXPECT_FALSE(IsValidPushJob(""));
  EXPECT_FALSE(IsValidPushJob("a/b"));
}

TEST(Pushgateway, MetricsFollowTheServersNamesAndLabels) {
  // The same writer as the server's /metrics (metrics/report_metrics.h); the protocol of
  // this report is not the scheduled one (warm-up and repetitions unset), hence _custom.
  const std::string text = RenderPushMetrics(SampleReport("cpu", true), 1700000000, "gpu-node-1");
  const std::string device =
      "device=\"cpu\",implementation=\"cpu_fused\",model=\"Test CPU\",node=\"gpu-node-1\",";
  const std::string labels = device +
                             "protocol=\"cold_custom\",suite=\"fused_add_rmsnorm_h2048\",uuid=\"\","
                             "workload=\"batch_size=1\"";
  const std::string suite = device +
                            "peak=\"device_attributes\",protocol=\"cold_custom\",suite="
                            "\"fused_add_rmsnorm_h2048\",uuid=\"\"";
  const std::string run =
      "device=\"cpu\",model=\"Test CPU\",node=\"gpu-node-1\",protocol=\"cold_custom\","
      "suite=\"fused_add_rmsnorm_h2048\",uuid=\"\"";
  for (const std::string& line :
       {"kerneleval_benchmark_latency_seconds{" + labels + "} 2e-06",
        "kerneleval_benchmark_bandwidth_bytes_per_second{" + labels + "} 8192000000",
        "kerneleval_benchmark_sol_ratio{" + device +
            "peak=\"device_attributes\",protocol=\"cold_custom\",suite=\"fused_add_rmsnorm_h2048\","
            "uuid=\"\",workload=\"batch_size=1\"} 0.25",
        "kerneleval_benchmark_correct{" + labels + "} 1",
        "kerneleval_benchmark_suite_mean_latency_seconds{" + device +
            "protocol=\"cold_custom\",suite=\"fused_add_rmsnorm_h2048\",uuid=\"\"} 2e-06",
        "kerneleval_benchmark_suite_sol_ratio{" + suite + "} 0.25",
        "kerneleval_benchmark_runtime_errors{" + run + "} 0",
        "kerneleval_benchmark_last_run_timestamp_seconds{" + run + "} 1700000000"}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\nin:\n" << text;
  }
  // An implementation that failed somewhere has no suite figures (as on the server).
  const std::string failed = RenderPushMetrics(SampleReport("cpu", false), 1, "gpu-node-1");
  EXPECT_EQ(failed.find("kerneleval_benchmark_suite_sol_ratio{"), std::string::npos);
  EXPECT_NE(failed.find("kerneleval_benchmark_correct{" + labels + "} 0\n"), std::string::npos);
  // A runtime error has no verdict: no correct series (not a 0 that would claim a wrong
  // result), no figures, and one runtime error on the device (as on the server).
  v1::BenchmarkReport errored = SampleReport("cpu", false);
  errored.mutable_results(0)->set_status(v1::RESULT_STATUS_RUNTIME_ERROR);
  const std::string error_text = RenderPushMetrics(errored, 1, "gpu-node-1");
  EXPECT_EQ(error_text.find("kerneleval_benchmark_correct{"), std::string::npos) << error_text;
  EXPECT_EQ(error_text.find("kerneleval_benchmark_latency_seconds{"), std::string::npos);
  EXPECT_EQ(error_text.find("kerneleval_benchmark_sol_ratio{"), std::string::npos);
  EXPECT_NE(error_text.find("kerneleval_benchmark_runtime_errors{" + run + "} 1\n"),
            std::string::npos)
      << error_text;
}

}  // namespace
}  // namespace kerneleval::client
