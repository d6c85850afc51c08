// What the store tests share: a small CPU suite, a benchmark through the real client, the
// real CLI (parsed and run in-process on its own channel), and synthetic reports with
// planted sample distributions.
#pragma once

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/cli.h"
#include "client/results_command.h"
#include "test_server.h"

namespace kerneleval::testing {

// fp32, hidden 256, batches 3 and 17: a few milliseconds per sample on a loaded host.
inline v1::SuiteDefinition SmallSuite(const std::string& name = "store_small") {
  v1::SuiteDefinition s;
  s.set_name(name);
  s.set_dtype(v1::DTYPE_FP32);
  s.set_mode(v1::MODE_OUTPUT);
  s.set_eps(1e-6);
  v1::Axis* batch = s.add_axes();
  batch->set_name("batch_size");
  v1::Axis* hidden = s.add_axes();
  hidden->set_name("hidden_size");
  hidden->set_is_const(true);
  hidden->set_value(256);
  for (int b : {3, 17}) {
    v1::Workload* w = s.add_workloads();
    w->set_name("batch_size=" + std::to_string(b));
    (*w->mutable_axes())["batch_size"] = b;
  }
  return s;
}

inline v1::BenchmarkReport Bench(const TestServer& t, std::vector<std::string> impls,
                                 const std::string& suite = "store_small") {
  v1::BenchmarkRequest request;
  *request.mutable_custom_suite() = SmallSuite(suite);
  for (const auto& i : impls) request.add_implementations(i);
  request.mutable_protocol()->set_warmup(2);
  request.mutable_protocol()->set_repetitions(20);
  v1::BenchmarkReport report;
  const grpc::Status s = t.client->Benchmark(request, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  EXPECT_TRUE(s.ok()) << s.error_message();
  return report;
}

struct CliResult {
  int rc = -1;
  std::string out, err;
};

// `kerneleval --target T ARGS...` through the CLI's own parser and command.
inline CliResult Cli(const std::string& target, std::vector<std::string> args) {
  args.insert(args.begin(), {"--target", target});
  client::cli::CliConfig config;
  CliResult r;
  if (absl::Status s = client::cli::ParseArgs(args, &config); !s.ok()) {
    r.rc = client::cli::kExitUsage;
    r.err = std::string(s.message());
    return r;
  }
  std::ostringstream out, err;
  r.rc = client::cli::RunResultsCommand(config, *client::cli::ProcessResultsFlags(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// Reports are written by the store's writer thread after the Benchmark answer: polls
// `history` until `count` results of `suite` are visible (or 10 s pass).
inline std::size_t WaitForResults(const std::string& target, const std::string& suite,
                                  std::size_t count) {
  std::size_t seen = 0;
  for (int i = 0; i < 100 && seen < count; ++i) {
    const CliResult r = Cli(target, {"history", "--suite", suite, "--json", "--limit", "1000"});
    const std::string key = "\"id\"";
    seen = 0;
    for (std::size_t pos = r.out.find(key); pos != std::string::npos;
         pos = r.out.find(key, pos + 1)) {
      ++seen;
    }
    if (seen < count) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return seen;
}

// A stored-looking report of one implementation on two workloads, samples drawn from a
// log-normal of the given median and spread (2 % is a quiet GPU).
inline v1::BenchmarkReport SyntheticReport(std::uint64_t seed, double median, double spread,
                                           int samples = 100) {
  v1::BenchmarkReport report;
  report.set_suite("synthetic");
  *report.mutable_definition() = SmallSuite("synthetic");
  report.mutable_protocol()->set_seed(200);
  report.mutable_protocol()->set_repetitions(static_cast<std::uint32_t>(samples));
  report.set_complete(true);
  v1::Environment* env = report.add_environments();
  env->mutable_device()->set_name("cuda:0");
  env->mutable_device()->set_model("NVIDIA H200");
  env->mutable_device()->set_uuid("GPU-synthetic");
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> d(std::log(median), spread);
  for (const char* w : {"batch_size=3", "batch_size=17"}) {
    v1::WorkloadResult* r = report.add_results();
    r->set_workload(w);
    (*r->mutable_axes())["batch_size"] = std::stoi(std::string(w).substr(11));
    (*r->mutable_axes())["hidden_size"] = 256;
    r->set_implementation("fused");
    r->set_device("cuda:0");
    r->set_status(v1::RESULT_STATUS_PASSED);
    std::vector<double> v;
    for (int i = 0; i < samples; ++i) v.push_back(d(rng));
    for (double x : v) r->add_samples_seconds(x);
    r->mutable_latency()->set_samples(static_cast<std::uint32_t>(samples));
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    r->mutable_latency()->set_median_seconds(sorted[sorted.size() / 2]);
    v1::SolFigure* sol = r->add_sol();
    sol->set_source(v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
    sol->set_sol_ratio(1e-6 / median);
  }
  return report;
}

// The report with every sample (and median) multiplied by `factor`: a planted change.
inline v1::BenchmarkReport Scaled(v1::BenchmarkReport report, double factor) {
  for (v1::WorkloadResult& r : *report.mutable_results()) {
    for (double& x : *r.mutable_samples_seconds()) x *= factor;
    r.mutable_latency()->set_median_seconds(r.latency().median_seconds() * factor);
  }
  return report;
}

inline std::string TempDir(const std::string& name) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/kerneleval-store-" + name +
                    "-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kerneleval::testing
