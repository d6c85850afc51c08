// Sustained mixed load on a loopback server with two CPU devices: 16 client threads send
// Runs of random shapes, dtypes and modes (every output checked against the fp64 reference
// within the dtype's tolerance) and small Benchmarks of a custom suite, for KERNELEVAL_LOAD_SECONDS
// (default 20). Counts requests, errors and latency percentiles, and watches the process's
// resident memory (server and clients share the process) for growth after a warm-up phase.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "robustness_util.h"
#include "test_server.h"

#if defined(__SANITIZE_ADDRESS__)
#define KERNELEVAL_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KERNELEVAL_UNDER_ASAN 1
#endif
#endif

namespace kerneleval::testing {
namespace {

using Clock = std::chrono::steady_clock;

double EnvNumber(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return end != v && d > 0 ? d : fallback;
}

// VmRSS of this process in bytes (0 when unavailable).
std::uint64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) << 10;
  }
  return 0;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct LoadStats {
  std::atomic<std::uint64_t> runs{0}, benchmarks{0}, exhausted{0}, errors{0}, mismatches{0};
  std::mutex mu;
  std::vector<double> run_seconds, benchmark_seconds;
  std::vector<std::string> first_errors;

  void Error(std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_errors.size() < 10) first_errors.push_back(std::move(what));
  }
};

void OneRun(const client::KernelEvalClient& c, std::mt19937_64& rng, LoadStats* stats) {
  static const v1::DType kDTypes[] = {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32};
  static const v1::Mode kModes[] = {v1::MODE_OUTPUT, v1::MODE_OUTPUT_AND_RESIDUAL,
                                    v1::MODE_IN_PLACE, v1::MODE_UNSPECIFIED};
  static const std::int64_t kHidden[] = {1, 7, 111, 512, 1000, 2048, 4096};
  const v1::DType dtype = kDTypes[rng() % 3];
  const v1::Mode mode = kModes[rng() % 4];
  const std::int64_t batch = 1 + static_cast<std::int64_t>(rng() % 64);
  const std::int64_t hidden = kHidden[rng() % 7];
  v1::RunRequest req = MakeRunRequest(dtype, mode, batch, hidden, rng());
  if (rng() % 3 == 0) req.set_eps(1e-5 * static_cast<double>(1 + rng() % 100));
  req.set_check_correctness(rng() % 4 == 0);
  req.set_repetitions(static_cast<std::uint32_t>(rng() % 3));
  v1::RunResponse resp;
  const auto t0 = Clock::now();
  const grpc::Status s = c.Run(req, &resp);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stats->runs++;
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    stats->exhausted++;
    return;
  }
  if (!s.ok()) {
    stats->errors++;
    stats->Error("Run: " + std::to_string(s.error_code()) + " " + s.error_message());
    return;
  }
  const std::string diff = CompareWithReference(req, resp);
  const bool bad_check = req.check_correctness() && !resp.correctness().passed();
  if (!diff.empty() || bad_check) {
    stats->mismatches++;
    stats->Error("Run " + v1::DType_Name(dtype) + " " + v1::Mode_Name(mode) + " " +
                 std::to_string(batch) + "x" + std::to_string(hidden) + ": " +
                 (diff.empty() ? "correctness check failed" : diff));
  }
  std::lock_guard<std::mutex> lock(stats->mu);
  stats->run_seconds.push_back(seconds);
}

void OneBenchmark(const client::KernelEvalClient& c, std::mt19937_64& rng, LoadStats* stats) {
  static const v1::DType kDTypes[] = {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32};
  v1::BenchmarkRequest req;
  // Distinct batches: workload names, derived from them, must be unique in a suite.
  *req.mutable_custom_suite() =
      SmallSuite(kDTypes[rng() % 3], {1, 2 + static_cast<int>(rng() % 31)}, 64 + rng() % 512);
  req.mutable_protocol()->set_warmup(1);
  req.mutable_protocol()->set_repetitions(3);
  req.mutable_protocol()->set_cache(rng() % 2 ? v1::CACHE_MODE_HOT : v1::CACHE_MODE_COLD);
  req.mutable_protocol()->set_seed(rng());
  v1::BenchmarkReport report;
  const auto t0 = Clock::now();
  const grpc::Status s = c.Benchmark(req, [&](const v1::BenchmarkEvent& e) {
    if (e.has_report()) report = e.report();
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stats->benchmarks++;
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    stats->exhausted++;
    return;
  }
  if (!s.ok()) {
    stats->errors++;
    stats->Error("Benchmark: " + std::to_string(s.error_code()) + " " + s.error_message());
    return;
  }
  bool passed = report.complete() && report.results_size() > 0;
  for (const v1::WorkloadResult& r : report.results()) {
    passed = passed && r.status() == v1::RESULT_STATUS_PASSED;
  }
  if (!passed) {
    stats->mismatches++;
    stats->Error("Benchmark report not complete and passing: " + report.ShortDebugString());
  }
  std::lock_guard<std::mutex> lock(stats->mu);
  stats->benchmark_seconds.push_back(seconds);
}

TEST(Load, MixedTrafficStaysCorrectAndMemoryStaysBounded) {
  const double total_seconds = EnvNumber("KERNELEVAL_LOAD_SECONDS", 20);
  const int threads = static_cast<int>(EnvNumber("KERNELEVAL_LOAD_THREADS", 16));
  const auto seed = static_cast<std::uint64_t>(EnvNumber("KERNELEVAL_LOAD_SEED", 2024));
  const double warmup_seconds = std::max(2.0, 0.25 * total_seconds);

  server::ServerOptions o = LoopbackOptions();
  o.device = "cpu";
  o.cpu_devices = 2;
  // One request in flight per client thread at most, so a full queue cannot happen with
  // this capacity; it is still counted should it appear.
  o.queue_capacity = 256;
  TestServer t = StartServer(o);
  ASSERT_NE(t.client, nullptr);
  std::vector<std::unique_ptr<client::KernelEvalClient>> clients(4);
  for (auto& c : clients) {
    client::ClientOptions co;
    co.target = t.target();
    co.deadline_seconds = 120;
    ASSERT_TRUE(client::KernelEvalClient::Create(co, &c).ok());
  }

  const std::uint64_t rss_start = ResidentBytes();
  LoadStats stats;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(i));
      const client::KernelEvalClient& c = *clients[static_cast<std::size_t>(i) % clients.size()];
      while (!stop.load()) {
        if (rng() % 10 == 0) {
          OneBenchmark(c, rng, &stats);
        } else {
          OneRun(c, rng, &stats);
        }
      }
    });
  }
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup_seconds));
  const std::uint64_t rss_warm = ResidentBytes();
  const std::uint64_t requests_warm = stats.runs + stats.benchmarks;
  std::uint64_t rss_peak = rss_warm;
  while (Clock::now() - t0 < std::chrono::duration<double>(total_seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    rss_peak = std::max(rss_peak, ResidentBytes());
  }
  stop.store(true);
  for (std::thread& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::uint64_t rss_end = ResidentBytes();

  // Every device's queue empties again and the server still answers. A job answers its RPC
  // just before it returns, so the last one may still count as running for a moment.
  v1::ListDevicesResponse devices;
  std::uint32_t depth = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    devices.Clear();
    ASSERT_TRUE(t.client->ListDevices(&devices).ok());
    depth = 0;
    for (const v1::Device& d : devices.devices()) depth += d.queue_depth();
    if (depth == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(devices.devices_size(), 2);
  EXPECT_EQ(depth, 0u) << devices.ShortDebugString();

  const std::uint64_t requests = stats.runs + stats.benchmarks;
  auto mb = [](std::uint64_t b) { return static_cast<double>(b) / 1e6; };
  std::printf(
      "load: %d threads, %.1f s (warm-up %.1f s), seed %llu\n"
      "  requests %llu (%.1f/s): runs %llu, benchmarks %llu; after warm-up %llu\n"
      "  RESOURCE_EXHAUSTED %llu, other errors %llu, wrong results %llu\n"
      "  Run latency p50 %.2f ms p99 %.2f ms; Benchmark latency p50 %.2f ms p99 %.2f ms\n"
      "  RSS start %.1f MB, after warm-up %.1f MB, peak %.1f MB, end %.1f MB\n",
      threads, elapsed, warmup_seconds, static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(requests), static_cast<double>(requests) / elapsed,
      static_cast<unsigned long long>(stats.runs.load()),
      static_cast<unsigned long long>(stats.benchmarks.load()),
      static_cast<unsigned long long>(requests - requests_warm),
      static_cast<unsigned long long>(stats.exhausted.load()),
      static_cast<unsigned long long>(stats.errors.load()),
      static_cast<unsigned long long>(stats.mismatches.load()),
      1e3 * Percentile(stats.run_seconds, 0.5), 1e3 * Percentile(stats.run_seconds, 0.99),
      1e3 * Percentile(stats.benchmark_seconds, 0.5),
      1e3 * Percentile(stats.benchmark_seconds, 0.99), mb(rss_start), mb(rss_warm), mb(rss_peak),
      mb(rss_end));
  for (const std::string& e : stats.first_errors) std::printf("  error: %s\n", e.c_str());

  EXPECT_GT(stats.runs.load(), static_cast<std::uint64_t>(threads));
  EXPECT_GT(stats.benchmarks.load(), 0u);
  EXPECT_EQ(stats.errors.load(), 0u);
  EXPECT_EQ(stats.mismatches.load(), 0u);
  // Rare by construction (see queue_capacity); more than 1% means the queue bound misbehaves.
  EXPECT_LE(stats.exhausted.load() * 100, requests);
#ifdef KERNELEVAL_UNDER_ASAN
  std::printf("  (AddressSanitizer's quarantine holds freed memory: RSS bound not checked)\n");
#else
  // Allocator caches and gRPC's pools settle during the warm-up; what grows after it by more
  // than 30% + 50 MB is a leak, not noise.
  if (rss_warm > 0) {
    EXPECT_LE(rss_end, rss_warm + rss_warm * 3 / 10 + (std::uint64_t{50} << 20))
        << "resident memory grew from " << mb(rss_warm) << " MB to " << mb(rss_end) << " MB";
  }
#endif
}

}  // namespace
}  // namespace kerneleval::testing
