#include "server/device/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kerneleval/kernels/cpu_simd.h"
#include "server/device/sample_loop.h"

namespace kerneleval::server {
namespace {

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

// The largest data or unified cache the kernel reports for CPU 0 (sysfs). glibc's sysconf
// reads CPUID instead, which virtual machines pass through unchanged: on the 2-vCPU EPYC guest
// of docs/results/cpu-backend.md it says 320 MiB of L3 where sysfs says 32 MiB.
std::size_t SysfsLastLevelCacheBytes() {
  std::size_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = absl::StrCat("/sys/devices/system/cpu/cpu0/cache/index", index, "/");
    std::ifstream type_file(dir + "type"), size_file(dir + "size");
    std::string type, size;
    if (!(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || size.empty()) continue;
    std::uint64_t value = 0;
    const char unit = size.back();
    const std::string digits =
        unit == 'K' || unit == 'M' || unit == 'G' ? size.substr(0, size.size() - 1) : size;
    if (!absl::SimpleAtoi(digits, &value)) continue;
    const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    best = std::max<std::size_t>(best, static_cast<std::size_t>(value << shift));
  }
  return best;
}

std::size_t LastLevelCacheBytes() {
  if (const std::size_t sysfs = SysfsLastLevelCacheBytes(); sysfs > 0) return sysfs;
  long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  // Unknown: assume a large server cache.
  return bytes > 0 ? static_cast<std::size_t>(bytes) : std::size_t{64} << 20;
}

std::uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// One call's arguments: `problem` on these tensors (residual_out only where the mode writes
// it).
FusedAddRmsNormArgs ArgsFor(const Problem& problem, const void* x, const void* r,
                            const void* weight, void* out, void* res) {
  FusedAddRmsNormArgs a;
  a.dtype = problem.dtype;
  a.mode = problem.mode;
  a.batch = problem.batch;
  a.hidden = problem.hidden;
  a.eps = problem.eps;
  a.hidden_states = x;
  a.residual = r;
  a.weight = weight;
  a.output = out;
  a.residual_out = WritesResidual(problem.mode) ? res : nullptr;
  return a;
}

}  // namespace

std::vector<CpuImplementation> BuiltinCpuImplementations() {
  const std::string simd = absl::StrCat(" (Highway SIMD, ", CpuSimdTarget(),
                                        " here; rows spread over the device's threads)");
  CpuImplementation fused{
      "cpu_fused", "Fused add + RMSNorm on the host, one pass per row, fp32 accumulation" + simd,
      [](const FusedAddRmsNormArgs& args, void*) { FusedAddRmsNormCpu(args); }};
  fused.run_on_threads = [](const FusedAddRmsNormArgs& args, void*, CpuThreadPool& threads) {
    FusedAddRmsNormCpu(args, &threads);
  };
  CpuImplementation unfused{
      "cpu_unfused", "Two host passes (add, then RMSNorm), the sum rounded in between" + simd,
      [](const FusedAddRmsNormArgs& args, void* scratch) { UnfusedAddRmsNormCpu(args, scratch); }};
  unfused.run_on_threads = [](const FusedAddRmsNormArgs& args, void* scratch,
                              CpuThreadPool& threads) {
    UnfusedAddRmsNormCpu(args, scratch, &threads);
  };
  return {std::move(fused), std::move(unfused)};
}

std::vector<CpuImplementation> ProcessFaultImplementations() {
  return {
      {"fault_crash", "Test only: aborts the device host process (a crashed device)",
       [](const FusedAddRmsNormArgs&, void*) { std::abort(); }, true},
      {"fault_hang", "Test only: never returns (a hung device)",
       [](const FusedAddRmsNormArgs&, void*) {
         for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
       },
       true},
  };
}

CpuBackend::CpuBackend(std::string name, std::vector<CpuImplementation> impls,
                       std::size_t copy_buffer_bytes, int threads)
    : name_(std::move(name)),
      impls_(std::move(impls)),
      copy_buffer_bytes_(copy_buffer_bytes),
      last_level_cache_bytes_(LastLevelCacheBytes()),
      model_(CpuModelName()),
      memory_bytes_(PhysicalMemoryBytes()),
      threads_(threads > 0 ? threads : CpuThreadPool::AvailableThreads()) {}

v1::Device CpuBackend::Describe() const {
  v1::Device d;
  d.set_name(name_);
  d.set_kind("cpu");
  d.set_model(model_);
  d.set_memory_bytes(memory_bytes_);
  d.set_l2_cache_bytes(last_level_cache_bytes_);
  d.set_measured_copy_bytes_per_second(copy_bandwidth_.load());
  d.set_cold_flush_bytes(2 * last_level_cache_bytes_);
  d.set_cold_flush_seconds(flush_seconds_.load());
  d.set_healthy(true);
  return d;
}

std::vector<v1::Implementation> CpuBackend::Implementations() const {
  return DescribeImplementations(impls_, "cpu");
}

const CpuImplementation* CpuBackend::Find(const std::string& impl) const {
  for (const CpuImplementation& i : impls_) {
    if (i.name == impl) return &i;
  }
  return nullptr;
}

void CpuBackend::Call(const CpuImplementation& impl, const FusedAddRmsNormArgs& args,
                      void* scratch) {
  if (impl.run_on_threads) {
    impl.run_on_threads(args, scratch, threads_);
  } else {
    impl.run(args, scratch);
  }
}

absl::Status CpuBackend::WarmUp() {
  // memcpy bandwidth on all of the device's threads (each copies 1 MiB blocks), read +
  // written bytes counted, best of five: the CPU's SOL reference, as many cores as the
  // kernel uses. The buffers are freed before the device takes traffic.
  std::vector<unsigned char> src(copy_buffer_bytes_, 1), dst(copy_buffer_bytes_, 0);
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  const std::size_t blocks = (copy_buffer_bytes_ + kBlock - 1) / kBlock;
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    threads_.ParallelFor(blocks, [&](std::size_t b) {
      const std::size_t begin = b * kBlock;
      std::memcpy(dst.data() + begin, src.data() + begin,
                  std::min(kBlock, copy_buffer_bytes_ - begin));
    });
    const double s = Seconds(std::chrono::steady_clock::now() - t0);
    if (s > 0) best = std::max(best, 2.0 * static_cast<double>(copy_buffer_bytes_) / s);
  }
  copy_bandwidth_.store(best);
  // What a cold protocol adds between calls (outside the timed window), said with every
  // report: one read of twice the last-level cache, timed once warm. The buffer is freed:
  // the cold protocol allocates its own when first asked.
  const std::vector<std::uint64_t> flush(2 * last_level_cache_bytes_ / sizeof(std::uint64_t), 1);
  ReadOnEveryThread(flush.data(), flush.size());
  const auto t0 = std::chrono::steady_clock::now();
  ReadOnEveryThread(flush.data(), flush.size());
  flush_seconds_.store(Seconds(std::chrono::steady_clock::now() - t0));
  return absl::OkStatus();
}

void CpuBackend::ReadOnEveryThread(const std::uint64_t* words, std::size_t count) {
  const auto slices = static_cast<std::size_t>(threads_.size());
  const std::size_t per_slice = (count + slices - 1) / slices;
  threads_.ParallelFor(slices, [&](std::size_t slice) {
    const std::size_t end = std::min(count, (slice + 1) * per_slice);
    std::uint64_t sum = 0;
    for (std::size_t i = slice * per_slice; i < end; ++i) sum += words[i];
    flush_sink_.fetch_add(sum, std::memory_order_relaxed);  // the reads cannot be elided
  });
}

void CpuBackend::FlushCaches() {
  if (flush_buffer_ == nullptr) {
    // Twice the last-level cache (64 MiB on the 32 MiB L3 of the results machine), first
    // needed by a cold protocol: an idle server holds none of it.
    flush_words_ = 2 * last_level_cache_bytes_ / sizeof(std::uint64_t);
    flush_buffer_.reset(new std::uint64_t[flush_words_]);
    std::fill_n(flush_buffer_.get(), flush_words_, std::uint64_t{1});
  }
  // Reads, not a memset: a memset leaves the cache full of dirty lines whose write-back then
  // lands inside the timed call (see kernels/include/kerneleval/kernels/l2_flush_cuda.h for
  // the same effect on a GPU). One slice per thread, so each core's private caches (1 MiB L2
  // on the results machine, 32 MiB slices) are evicted as well as the shared level.
  ReadOnEveryThread(flush_buffer_.get(), flush_words_);
}

// The timed calls after the result call, on working sets of their own: inputs are only
// copied where a call mutates them (in place) or where rotation needs several (enough copies
// to exceed twice the last-level cache, at most 16).
absl::StatusOr<Measurement> CpuBackend::TimeCalls(const Problem& problem, const HostInputs& inputs,
                                                  const CpuImplementation& fn,
                                                  const MeasureOptions& options,
                                                  unsigned char* scratch) {
  const std::size_t row_bytes = problem.TensorBytes();
  const bool writes_residual = WritesResidual(problem.mode);
  const bool in_place = problem.mode == Mode::kInPlace;
  auto args_with = [&](const void* x, const void* r, void* out, void* res) {
    return ArgsFor(problem, x, r, inputs.weight, out, res);
  };
  std::size_t copies = 1;
  if (options.rotate_inputs && row_bytes > 0) {
    copies = std::clamp<std::size_t>(2 * last_level_cache_bytes_ / (3 * row_bytes) + 1, 1, 16);
  }
  const bool own_inputs = in_place || copies > 1;
  struct Set {
    std::vector<unsigned char> x, r, out, res;
  };
  std::vector<Set> sets(copies);
  for (Set& set : sets) {
    if (own_inputs) {
      set.x.assign(static_cast<const unsigned char*>(inputs.hidden_states),
                   static_cast<const unsigned char*>(inputs.hidden_states) + row_bytes);
      set.r.assign(static_cast<const unsigned char*>(inputs.residual),
                   static_cast<const unsigned char*>(inputs.residual) + row_bytes);
    }
    if (!in_place) {
      set.out.resize(row_bytes);
      set.res.resize(writes_residual ? row_bytes : 0);
    }
  }
  auto args_for = [&](Set& set) {
    const void* x = own_inputs ? set.x.data() : inputs.hidden_states;
    const void* r = own_inputs ? set.r.data() : inputs.residual;
    return in_place ? args_with(x, r, set.x.data(), set.r.data())
                    : args_with(x, r, set.out.data(), set.res.data());
  };
  std::size_t next = 0;
  auto timed_call = [&]() -> absl::StatusOr<double> {
    if (options.cold) FlushCaches();
    Set& set = sets[next];
    next = (next + 1) % sets.size();
    const FusedAddRmsNormArgs a = args_for(set);
    const auto t0 = std::chrono::steady_clock::now();
    Call(fn, a, scratch);
    return Seconds(std::chrono::steady_clock::now() - t0);
  };
  return CollectSamples(options, timed_call);
}

absl::StatusOr<Measurement> CpuBackend::Measure(const Problem& problem, const HostInputs& inputs,
                                                const HostOutputs& outputs, const std::string& impl,
                                                const MeasureOptions& options) {
  const CpuImplementation* fn = Find(impl);
  if (fn == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("implementation '", impl, "' is not available on ", name_));
  }
  RETURN_IF_ERROR(CheckProtocolFits(
      capabilities(), {options.graph, options.check_calls, options.profile, options.timer}, name_));
  const std::size_t row_bytes = problem.TensorBytes();
  const bool writes_residual = WritesResidual(problem.mode);
  const bool in_place = problem.mode == Mode::kInPlace;
  auto args_with = [&](const void* x, const void* r, void* out, void* res) {
    return ArgsFor(problem, x, r, inputs.weight, out, res);
  };
  // Uninitialized: only implementations that need scratch touch it.
  std::unique_ptr<unsigned char[]> scratch(new unsigned char[std::max<std::size_t>(row_bytes, 1)]);

  // The result call writes straight into the caller's buffers (in-place modes first copy
  // the inputs there and run on them), so a Run does no extra copies of its tensors.
  std::vector<unsigned char> own_out, own_res;
  void* out = outputs.output;
  void* res = outputs.residual_out;
  if (out == nullptr) {
    own_out.assign(row_bytes, 0xff);
    out = own_out.data();
  }
  if (writes_residual && res == nullptr) {
    own_res.assign(row_bytes, 0xff);
    res = own_res.data();
  }
  FusedAddRmsNormArgs result_args = args_with(inputs.hidden_states, inputs.residual, out, res);
  // The device is this process's memory: the only "host-to-device" copy is the one an
  // in-place call makes into its outputs, and results need no copy back.
  const auto c0 = std::chrono::steady_clock::now();
  if (in_place) {
    std::memcpy(out, inputs.hidden_states, row_bytes);
    std::memcpy(res, inputs.residual, row_bytes);
    result_args = args_with(out, res, out, res);
  }
  const auto r0 = std::chrono::steady_clock::now();
  Call(*fn, result_args, scratch.get());
  const double result_seconds = Seconds(std::chrono::steady_clock::now() - r0);

  // Hot, no warm-up, fixed count (a Run's default): the result call is the first sample,
  // taken under the same conditions as the others would be.
  MeasureOptions rest = options;
  std::vector<double> first;
  if (options.warmup == 0 && !options.cold && !options.rotate_inputs && !options.adaptive.enabled &&
      options.repetitions > 0) {
    first.push_back(result_seconds);
    rest.repetitions -= 1;
  }
  Measurement m;
  if (rest.adaptive.enabled || rest.repetitions > 0 || rest.warmup > 0) {
    ASSIGN_OR_RETURN(m, TimeCalls(problem, inputs, *fn, rest, scratch.get()));
  }
  m.samples_seconds.insert(m.samples_seconds.begin(), first.begin(), first.end());
  m.timer = v1::TIMER_HOST_CLOCK;
  m.host_to_device_seconds = Seconds(r0 - c0);
  m.device_seconds = Seconds(std::chrono::steady_clock::now() - r0);
  return m;
}

v1::Clocks CpuBackend::ReadClocks(bool* available) {
  *available = false;
  return v1::Clocks();
}

}  // namespace kerneleval::server
