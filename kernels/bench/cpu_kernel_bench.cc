// The CPU kernel on one thread against memcpy, cold (a 64 MiB read between calls), timed with
// both the wall clock and the thread's CPU clock. On a machine shared with other work the
// wall time measures the scheduler; GB/s per CPU-second measures the code while it runs
// (memory stalls count as CPU time). Usage: kerneleval-cpu-kernel-bench [batch] [hidden] [calls]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "kerneleval/kernels/cpu_simd.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace {

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

volatile std::uint64_t sink;

void Flush(const std::vector<std::uint64_t>& buffer) {
  std::uint64_t sum = 0;
  for (std::uint64_t v : buffer) sum += v;
  sink = sum;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kerneleval;
  const std::int64_t batch = argc > 1 ? std::atoll(argv[1]) : 16254;
  const std::int64_t hidden = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 8;
  const auto n = static_cast<std::size_t>(batch * hidden);
  std::vector<std::uint16_t> x(n, 0x3f80), r(n, 0x3f00),
      w(static_cast<std::size_t>(hidden), 0x3f80), out(n);
  std::vector<unsigned char> copy_src(2 * n, 1), copy_dst(2 * n, 0);
  std::vector<std::uint64_t> flush((std::size_t{64} << 20) / sizeof(std::uint64_t), 1);
  FusedAddRmsNormArgs a;
  a.dtype = DType::kBF16;
  a.mode = Mode::kOutput;
  a.batch = batch;
  a.hidden = hidden;
  a.hidden_states = x.data();
  a.residual = r.data();
  a.weight = w.data();
  a.output = out.data();
  const double kernel_bytes = static_cast<double>(BytesMoved(a.dtype, a.mode, batch, hidden));
  const double copy_bytes = 2.0 * static_cast<double>(copy_src.size());
  std::printf("bf16 output B=%lld H=%lld, %s, one thread, cold\n", static_cast<long long>(batch),
              static_cast<long long>(hidden), CpuSimdTarget());
  for (int i = 0; i < calls; ++i) {
    Flush(flush);
    double c0 = CpuSeconds(), w0 = WallSeconds();
    FusedAddRmsNormCpu(a);
    const double kernel_cpu = CpuSeconds() - c0, kernel_wall = WallSeconds() - w0;
    Flush(flush);
    c0 = CpuSeconds();
    w0 = WallSeconds();
    std::memcpy(copy_dst.data(), copy_src.data(), copy_src.size());
    const double copy_cpu = CpuSeconds() - c0, copy_wall = WallSeconds() - w0;
    std::printf(
        "kernel %7.2f ms wall %7.2f ms cpu %6.2f GB/s per cpu-s | memcpy %7.2f ms wall %7.2f ms "
        "cpu %6.2f GB/s per cpu-s | ratio %.2f\n",
        kernel_wall * 1e3, kernel_cpu * 1e3, kernel_bytes / kernel_cpu / 1e9, copy_wall * 1e3,
        copy_cpu * 1e3, copy_bytes / copy_cpu / 1e9,
        (kernel_bytes / kernel_cpu) / (copy_bytes / copy_cpu));
  }
  return 0;
}
