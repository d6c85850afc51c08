// Run's answer carries its verdict as Benchmark's results do: the status (passed, incorrect,
// unchecked), how it was measured, the integrity flags and the calls checked, in the
// response and in every form the CLI prints. A real server on loopback whose CPU device also
// holds a planted wrong implementation (the oracle: its epsilon is 1, not 1e-6, so the fp64
// reference must refuse it), driven through the client library and the CLI.
#include <sstream>

#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

std::vector<server::CpuImplementation> WithWrongEps() {
  std::vector<server::CpuImplementation> impls = server::BuiltinCpuImplementations();
  impls.push_back({"wrong_eps", "epsilon 1 instead of 1e-6 (test only)",
                   [](const FusedAddRmsNormArgs& a, void*) {
                     FusedAddRmsNormArgs b = a;
                     b.eps = 1.0f;
                     FusedAddRmsNormCpu(b);
                   }});
  return impls;
}

TestServer StartWithWrongEps() {
  std::vector<std::unique_ptr<server::Backend>> backends;
  backends.push_back(std::make_unique<server::CpuBackend>("cpu", WithWrongEps()));
  return StartServer(LoopbackOptions(), std::move(backends));
}

// Small inputs of varied values, of mean square ~0.01, and a weight of ones: an epsilon of 1
// instead of 1e-6 shrinks every output about tenfold.
v1::RunRequest Varied(const std::string& impl, bool check) {
  v1::RunRequest r = SmallRun(4, 64);
  for (v1::Tensor* t : {r.mutable_hidden_states(), r.mutable_residual()}) {
    float* data = reinterpret_cast<float*>(t->mutable_data()->data());
    for (int i = 0; i < 4 * 64; ++i) data[i] = 0.01f * static_cast<float>(i % 17 - 8);
  }
  float* weight = reinterpret_cast<float*>(r.mutable_weight()->mutable_data()->data());
  for (int i = 0; i < 64; ++i) weight[i] = 1.0f;
  r.set_device("cpu");
  r.set_implementation(impl);
  r.set_check_correctness(check);
  r.set_repetitions(3);
  return r;
}

struct Outcome {
  int rc = -1;
  std::string out, err;
};

Outcome Cli(const std::vector<std::string>& args) {
  client::cli::CliConfig config;
  Outcome o;
  const absl::Status parsed = client::cli::ParseArgs(args, &config);
  EXPECT_TRUE(parsed.ok()) << parsed;
  std::ostringstream out, err;
  o.rc = client::cli::RunCommand(config, out, err);
  o.out = out.str();
  o.err = err.str();
  return o;
}

// The value of the table row `key` ("status", "measured as"), "" when absent.
std::string Row(const std::string& table, const std::string& key) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + " ", 0) == 0) {
      const std::size_t value = line.find_first_not_of(' ', key.size());
      return value == std::string::npos ? "" : line.substr(value);
    }
  }
  return "";
}

TEST(RunVerdict, ResponseCarriesPassedIncorrectAndUnchecked) {
  TestServer t = StartWithWrongEps();
  ASSERT_NE(t.client, nullptr);
  struct Case {
    std::string impl;
    bool check;
    v1::ResultStatus status;
  };
  for (const Case& c : {Case{"cpu_fused", true, v1::RESULT_STATUS_PASSED},
                        Case{"wrong_eps", true, v1::RESULT_STATUS_INCORRECT},
                        Case{"wrong_eps", false, v1::RESULT_STATUS_UNSPECIFIED}}) {
    SCOPED_TRACE(c.impl + (c.check ? " checked" : " unchecked"));
    v1::RunResponse response;
    const grpc::Status s = t.client->Run(Varied(c.impl, c.check), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.status(), c.status)
        << response.implementation() << " " << response.correctness().ShortDebugString();
    // The status agrees with the correctness it comes from.
    EXPECT_EQ(response.correctness().checked(), c.check);
    if (c.check) {
      EXPECT_EQ(response.correctness().passed(), c.status == v1::RESULT_STATUS_PASSED);
    }
    EXPECT_EQ(response.error(), "");
    // Run measures hot with the host clock on the CPU, as its timer field says.
    EXPECT_EQ(response.timer(), v1::TIMER_HOST_CLOCK);
    EXPECT_EQ(response.measured_as(), "host_clock, hot");
    // A built-in's calls are not checked one by one; a CPU Run is not flagged.
    EXPECT_EQ(response.calls_checked(), 0u);
    EXPECT_EQ(response.integrity_flags_size(), 0) << response.integrity_flags(0);
  }
}

TEST(RunVerdict, CliPrintsTheStatusInTheTableAndTheJson) {
  TestServer t = StartWithWrongEps();
  ASSERT_NE(t.client, nullptr);
  const std::vector<std::string> base = {
      "--target", t.target(), "run", "--batch",       "4", "--hidden", "64", "--dtype",
      "fp32",     "--device", "cpu", "--repetitions", "3", "--impl"};
  struct Case {
    std::string impl;
    std::vector<std::string> extra;
    std::string status;
    int rc;
  };
  for (const Case& c : {Case{"cpu_fused", {}, "passed", client::cli::kExitOk},
                        Case{"wrong_eps", {}, "incorrect", client::cli::kExitIncorrect},
                        Case{"wrong_eps", {"--no-check"}, "unchecked", client::cli::kExitOk}}) {
    SCOPED_TRACE(c.impl + " " + c.status);
    std::vector<std::string> args = base;
    args.push_back(c.impl);
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const Outcome table = Cli(args);
    EXPECT_EQ(table.rc, c.rc) << table.err;
    EXPECT_EQ(Row(table.out, "status"), c.status) << table.out;
    EXPECT_EQ(Row(table.out, "measured as"), "host_clock, hot") << table.out;

    args.insert(args.begin(), "--json");
    const Outcome json = Cli(args);
    EXPECT_EQ(json.rc, c.rc) << json.err;
    const nlohmann::json doc = nlohmann::json::parse(json.out, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << json.out;
    // The contract's short names; an unchecked Run has no verdict to name.
    EXPECT_EQ(doc.value("status", ""), c.status == "unchecked" ? "unspecified" : c.status)
        << json.out;
    EXPECT_EQ(doc.value("measured_as", ""), "host_clock, hot") << json.out;
    ASSERT_TRUE(doc.contains("integrity_flags")) << json.out;
    EXPECT_TRUE(doc["integrity_flags"].empty()) << json.out;
    EXPECT_EQ(doc.value("calls_checked", -1), 0) << json.out;
  }
}

}  // namespace
}  // namespace kerneleval::testing
