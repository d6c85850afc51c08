// Kernel microbenchmark for tuning: the fused kernel (and, with --sweep, its tuning variants)
// and the unfused two-kernel baseline on one device, under two protocols:
//   cold   L2 flushed before every call (cudaMemsetAsync of 2x the L2 size, or with
//          --flush=read the service's read flush, its grid cycled per call), CUDA events
//          around the single call, median of --reps.
//   graph  --graph-calls calls captured in one CUDA graph, replayed; per-call time, median of
//          the replays. Inputs rotate over enough copies to exceed the L2 when one call's
//          bytes are over half of it; smaller batches stay in L2, as in a model's graph.
// Bandwidth counts each declared tensor once (BytesMoved); the peak is memory clock x bus
// width x 2 from the device attributes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fused_add_rmsnorm_tuning.h"
#include "kernel_bench_options.h"
#include "kerneleval/kernels/cuda_owners.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"
#include "kerneleval/kernels/half_types.h"
#include "kerneleval/kernels/l2_flush_cuda.h"

namespace kerneleval {
namespace {

using bench::Options;
using bench::Parse;
using bench::Usage;

#define BENCH_CHECK(call)                                                  \
  do {                                                                     \
    const cudaError_t bench_err = (call);                                  \
    if (bench_err != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorName(bench_err));                           \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

// Device memory of `bytes`; exits where it cannot be had.
CudaDeviceMemory AllocateDevice(std::size_t bytes) {
  CudaDeviceMemory memory;
  BENCH_CHECK(CudaDeviceMemory::Allocate(bytes, &memory));
  return memory;
}

std::vector<CudaEvent> MakeEvents(int count) {
  std::vector<CudaEvent> events(count);
  for (CudaEvent& event : events) BENCH_CHECK(CreateCudaEvent(&event));
  return events;
}

// Captures `body` on `stream` and instantiates it; the graph itself is not needed past that.
CudaGraphExec CaptureGraph(cudaStream_t stream, const std::function<void()>& body) {
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  body();
  cudaGraph_t raw_graph = nullptr;
  BENCH_CHECK(cudaStreamEndCapture(stream, &raw_graph));
  const CudaGraph graph(raw_graph);
  cudaGraphExec_t exec = nullptr;
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
  return CudaGraphExec(exec);
}

struct Device {
  int id = 0;
  std::string name;
  int sms = 0;
  std::size_t l2_bytes = 0;
  double peak_gbps = 0;  // memory clock x bus width x 2 (DDR) / 8
};

Device QueryDevice() {
  Device d;
  BENCH_CHECK(cudaGetDevice(&d.id));
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, d.id));
  d.name = prop.name;
  int value = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, d.id));
  d.sms = value;
  BENCH_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrL2CacheSize, d.id));
  d.l2_bytes = static_cast<std::size_t>(value);
  int clock_khz = 0;
  int bus_bits = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, d.id));
  BENCH_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, d.id));
  d.peak_gbps = static_cast<double>(clock_khz) * 1e3 * bus_bits / 8 * 2 / 1e9;
  return d;
}

// Roughly standard normal values from a hash of the index (sum of four uniforms), written
// as the dtype: random data without a host round trip for 100 MB tensors.
__global__ void FillRandom(void* data, std::int64_t n, DType dtype, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u =
        static_cast<float>((z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48)) *
        (1.f / 65536.f);
    const float v = (u - 2.f) * 1.7320508f;
    switch (dtype) {
      case DType::kBF16:
        static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
        break;
      case DType::kFP16:
        static_cast<__half*>(data)[i] = __float2half_rn(v);
        break;
      case DType::kFP32:
        static_cast<float*>(data)[i] = v;
        break;
    }
  }
}

void Fill(void* data, std::int64_t n, DType dtype, std::uint64_t seed, cudaStream_t stream) {
  FillRandom<<<1024, 256, 0, stream>>>(data, n, dtype, seed);
  BENCH_CHECK(cudaGetLastError());
}

// One input set: what a single call touches.
struct Set {
  CudaDeviceMemory x, r, out, res;
};

struct Workload {
  std::int64_t batch = 0;
  std::vector<Set> sets;
  CudaDeviceMemory weight;
  CudaDeviceMemory scratch;

  FusedAddRmsNormArgs Args(const Options& o, int set) const {
    FusedAddRmsNormArgs a;
    a.dtype = o.dtype;
    a.mode = o.mode;
    a.batch = batch;
    a.hidden = o.hidden;
    a.eps = 1e-6f;
    const Set& s = sets[static_cast<std::size_t>(set) % sets.size()];
    a.hidden_states = s.x.get();
    a.residual = s.r.get();
    a.weight = weight.get();
    a.output = s.out.get();
    a.residual_out = WritesResidual(o.mode) ? s.res.get() : nullptr;
    if (o.mode == Mode::kInPlace) {
      a.output = s.x.get();
      a.residual_out = s.r.get();
    }
    return a;
  }
};

using LaunchFn = std::function<cudaError_t(const FusedAddRmsNormArgs&, cudaStream_t)>;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Timing {
  double cold_us = 0;
  double cold_min_us = 0;
  double graph_us = 0;
};

Timing Measure(const Options& o, const Device& dev, const Workload& w, const LaunchFn& launch,
               const CudaDeviceMemory& flush, const CudaDeviceMemory& sink, cudaStream_t stream) {
  Timing t;
  const std::size_t flush_bytes = 2 * dev.l2_bytes;
  constexpr int kWarmup = 5;
  std::vector<CudaEvent> start = MakeEvents(o.reps);
  std::vector<CudaEvent> stop = MakeEvents(o.reps);
  for (int i = -kWarmup; i < o.reps; ++i) {
    if (o.read_flush) {
      // The service's flush, its grid cycled from call to call as the service cycles it, so
      // that the calls do not all land their CTAs on the same SMs (l2_flush_cuda.h).
      BENCH_CHECK(LaunchL2Flush(flush.get(), flush_bytes, static_cast<unsigned*>(sink.get()),
                                dev.sms, stream, (i + kWarmup) % dev.sms));
    } else {
      BENCH_CHECK(cudaMemsetAsync(flush.get(), i & 0xff, flush_bytes, stream));
    }
    // The flush keeps the GPU busy for tens of microseconds, long enough for the host to
    // enqueue the call: host launch overhead stays outside the events.
    if (i >= 0) BENCH_CHECK(cudaEventRecord(start[i].get(), stream));
    BENCH_CHECK(launch(w.Args(o, 0), stream));
    if (i >= 0) BENCH_CHECK(cudaEventRecord(stop[i].get(), stream));
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> cold(o.reps);
  for (int i = 0; i < o.reps; ++i) {
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start[i].get(), stop[i].get()));
    cold[i] = ms * 1e3;
  }
  t.cold_us = Median(cold);
  t.cold_min_us = *std::min_element(cold.begin(), cold.end());

  const CudaGraphExec graph = CaptureGraph(stream, [&] {
    for (int i = 0; i < o.graph_calls; ++i) BENCH_CHECK(launch(w.Args(o, i), stream));
  });
  BENCH_CHECK(cudaGraphLaunch(graph.get(), stream));
  BENCH_CHECK(cudaGraphLaunch(graph.get(), stream));
  std::vector<CudaEvent> gs = MakeEvents(o.graph_replays);
  std::vector<CudaEvent> ge = MakeEvents(o.graph_replays);
  for (int i = 0; i < o.graph_replays; ++i) {
    BENCH_CHECK(cudaEventRecord(gs[i].get(), stream));
    BENCH_CHECK(cudaGraphLaunch(graph.get(), stream));
    BENCH_CHECK(cudaEventRecord(ge[i].get(), stream));
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> per_call(o.graph_replays);
  for (int i = 0; i < o.graph_replays; ++i) {
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, gs[i].get(), ge[i].get()));
    per_call[i] = ms * 1e3 / o.graph_calls;
  }
  t.graph_us = Median(per_call);
  return t;
}

// Fresh inputs in set 0, one call, then rows 0 and batch-1 against the fp64 reference.
// Returns the largest |error| relative to atol + rtol|ref| (pass: <= 1).
double Check(const Options& o, const Workload& w, const LaunchFn& launch, cudaStream_t stream) {
  const std::int64_t n = w.batch * o.hidden;
  Fill(w.sets[0].x.get(), n, o.dtype, 1, stream);
  Fill(w.sets[0].r.get(), n, o.dtype, 2, stream);
  BENCH_CHECK(cudaStreamSynchronize(stream));
  const std::size_t row_bytes = o.hidden * ElementSize(o.dtype);
  std::vector<std::uint8_t> x(2 * row_bytes), r(2 * row_bytes), wt(row_bytes), out(2 * row_bytes);
  const std::int64_t rows[2] = {0, w.batch - 1};
  auto copy_rows = [&](std::vector<std::uint8_t>& dst, const void* src) {
    for (int k = 0; k < 2; ++k) {
      BENCH_CHECK(cudaMemcpy(dst.data() + k * row_bytes,
                             static_cast<const char*>(src) + rows[k] * row_bytes, row_bytes,
                             cudaMemcpyDeviceToHost));
    }
  };
  const FusedAddRmsNormArgs args = w.Args(o, 0);
  copy_rows(x, args.hidden_states);
  copy_rows(r, args.residual);
  BENCH_CHECK(cudaMemcpy(wt.data(), w.weight.get(), row_bytes, cudaMemcpyDeviceToHost));
  BENCH_CHECK(launch(args, stream));
  BENCH_CHECK(cudaStreamSynchronize(stream));
  copy_rows(out, args.output);
  std::vector<double> ref(2 * o.hidden);
  FusedAddRmsNormReference(o.dtype, 2, o.hidden, 1e-6, x.data(), r.data(), wt.data(), ref.data(),
                           nullptr);
  const double tol = o.dtype == DType::kBF16 ? 1e-2 : o.dtype == DType::kFP16 ? 2e-3 : 1e-5;
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double got = LoadAsFloat(o.dtype, out.data(), i);
    const double e = std::abs(got - ref[i]) / (tol + tol * std::abs(ref[i]));
    worst = std::isfinite(e) ? std::max(worst, e) : INFINITY;
  }
  return worst;
}

struct Impl {
  std::string name;
  LaunchFn launch;
};

void PrintHeader(const Options& o, const Device& dev) {
  std::printf("device: %s, %d SMs, L2 %.1f MiB, attribute peak %.1f GB/s\n", dev.name.c_str(),
              dev.sms, dev.l2_bytes / 1048576.0, dev.peak_gbps);
  std::printf("op: %s %s hidden %lld, eps 1e-6\n", DTypeName(o.dtype), ModeName(o.mode),
              static_cast<long long>(o.hidden));
  std::printf(
      "timer: CUDA events. cold: L2 flushed before each call by %s of %.0f MiB (2x L2), "
      "events around one call, median (and min) of %d after 5 warm-ups. graph: %d calls in "
      "one CUDA graph, median per-call time over %d replays; inputs rotated over copies when "
      "one call's bytes exceed L2/2.\n",
      o.read_flush ? "the service's read kernel (grid cycled per call)" : "cudaMemsetAsync",
      2.0 * dev.l2_bytes / 1048576.0, o.reps, o.graph_calls, o.graph_replays);
}

// The implementations under test, in the order printed. "unfused" has no launch here: it
// needs the batch's scratch buffer (RunImpl binds it). The copy launch reads `o`, which must
// outlive the list.
std::vector<Impl> BuildImpls(const Options& o) {
  std::vector<Impl> impls;
  impls.push_back({"fused", [](const FusedAddRmsNormArgs& a, cudaStream_t s) {
                     return LaunchFusedAddRmsNorm(a, s);
                   }});
  auto tuned = [](FusedAddRmsNormTuning t) -> LaunchFn {
    return [t](const FusedAddRmsNormArgs& a, cudaStream_t s) {
      return LaunchFusedAddRmsNormTuned(a, t, s);
    };
  };
  if (o.sweep) {
    FusedAddRmsNormTuning t;
    t.pdl = false;
    impls.push_back({"fused:no-pdl", tuned(t)});
    t = {};
    t.vecs_per_thread = 1;
    impls.push_back({"fused:1vec/thread", tuned(t)});
  }
  if (o.sweep || o.split_sweep) {
    FusedAddRmsNormTuning no_split;
    no_split.ctas_per_row = -1;
    impls.push_back({"fused:no-split", tuned(no_split)});
    // Every split layout that fits this row: a row over c CTAs of one cluster, v units per
    // thread (SplitRowKernel).
    const std::int64_t units =
        o.hidden % (16 / ElementSize(o.dtype)) == 0 ? o.hidden / (16 / ElementSize(o.dtype)) : 0;
    for (int c : {1, 2, 4, 8}) {
      for (int v : {1, 2, 4}) {
        const std::int64_t threads = (units + c * v - 1) / (c * v);
        if (units == 0 || threads > 1024 || threads < 32) continue;
        FusedAddRmsNormTuning t;
        t.ctas_per_row = c;
        t.vecs_per_thread = v;
        impls.push_back({"fused:split" + std::to_string(c) + "x" +
                             std::to_string((threads + 31) / 32 * 32) + ",v" + std::to_string(v),
                         tuned(t)});
      }
    }
  }
  if (o.unfused) {
    impls.push_back({"unfused", nullptr});
  }
  if (o.copy && WritesResidual(o.mode)) {
    // The memory system's ceiling for this traffic: the same bytes (two tensors read, two
    // written) moved by the driver's device-to-device copies, no arithmetic.
    impls.push_back({"copy", [&o](const FusedAddRmsNormArgs& a, cudaStream_t s) {
                       const std::size_t bytes = a.batch * a.hidden * ElementSize(o.dtype);
                       cudaMemcpyAsync(a.output == a.hidden_states ? a.residual_out : a.output,
                                       a.hidden_states, bytes, cudaMemcpyDeviceToDevice, s);
                       return cudaMemcpyAsync(
                           a.residual_out == a.residual ? a.output : a.residual_out, a.residual,
                           bytes, cudaMemcpyDeviceToDevice, s);
                     }});
  }
  return impls;
}

// One batch's tensors, filled with random values: a single input set when a call's bytes fit
// in half the L2, otherwise enough sets (at most --graph-calls) to cover 3x the L2.
Workload MakeWorkload(const Options& o, const Device& dev, std::int64_t batch,
                      cudaStream_t stream) {
  const std::uint64_t bytes_moved = BytesMoved(o.dtype, o.mode, batch, o.hidden);
  const std::size_t tensor_bytes = batch * o.hidden * ElementSize(o.dtype);
  int sets = 1;
  if (bytes_moved > dev.l2_bytes / 2) {
    sets = static_cast<int>(std::max<std::uint64_t>(2, (3 * dev.l2_bytes) / bytes_moved + 1));
  }
  sets = std::min(sets, o.graph_calls);
  Workload w;
  w.batch = batch;
  for (int s = 0; s < sets; ++s) {
    Set set;
    set.x = AllocateDevice(tensor_bytes);
    set.r = AllocateDevice(tensor_bytes);
    set.out = AllocateDevice(tensor_bytes);
    set.res = AllocateDevice(tensor_bytes);
    Fill(set.x.get(), batch * o.hidden, o.dtype, 10 + 2 * s, stream);
    Fill(set.r.get(), batch * o.hidden, o.dtype, 11 + 2 * s, stream);
    w.sets.push_back(std::move(set));
  }
  w.weight = AllocateDevice(o.hidden * ElementSize(o.dtype));
  Fill(w.weight.get(), o.hidden, o.dtype, 3, stream);
  w.scratch = AllocateDevice(tensor_bytes);
  return w;
}

// Times and checks one implementation on one batch and prints its row (with --ncu, only
// launches it and says so).
void RunImpl(const Options& o, const Device& dev, const Workload& w, const Impl& impl,
             const CudaDeviceMemory& flush, const CudaDeviceMemory& sink, cudaStream_t stream) {
  LaunchFn launch = impl.launch;
  if (!launch) {
    void* scratch = w.scratch.get();
    launch = [scratch](const FusedAddRmsNormArgs& a, cudaStream_t s) {
      return LaunchUnfusedAddRmsNorm(a, scratch, s);
    };
  }
  if (o.ncu) {
    constexpr int kNcuCalls = 5;
    for (int i = 0; i < kNcuCalls; ++i) {
      BENCH_CHECK(launch(w.Args(o, 0), stream));
      BENCH_CHECK(cudaStreamSynchronize(stream));
    }
    std::printf("ncu: %s batch %lld: %d calls\n", impl.name.c_str(),
                static_cast<long long>(w.batch), kNcuCalls);
    return;
  }
  const std::uint64_t bytes_moved = BytesMoved(o.dtype, o.mode, w.batch, o.hidden);
  const Timing t = Measure(o, dev, w, launch, flush, sink, stream);
  const bool is_copy = impl.name == "copy";  // moves bytes only: nothing to check
  const double check = is_copy ? 0 : Check(o, w, launch, stream);
  const double cold_gbps = bytes_moved / (t.cold_us * 1e3);
  const double graph_gbps = bytes_moved / (t.graph_us * 1e3);
  const char* variant = impl.name == "unfused" ? "add+rmsnorm"
                        : is_copy              ? "memcpy_d2d"
                                               : FusedAddRmsNormVariant(w.Args(o, 0));
  const int sets = static_cast<int>(w.sets.size());
  std::printf("%-28s %7lld %-22s %9.2f %9.2f %8.0f %6.1f %9.2f %8.0f %6.1f %5d %6s\n",
              impl.name.c_str(), static_cast<long long>(w.batch), variant, t.cold_us, t.cold_min_us,
              cold_gbps, 100 * cold_gbps / dev.peak_gbps, t.graph_us, graph_gbps,
              100 * graph_gbps / dev.peak_gbps, sets, check <= 1 ? "ok" : "FAIL");
}

int Main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    Usage();
    return 2;
  }
  const Device dev = QueryDevice();
  PrintHeader(o, dev);
  const std::vector<Impl> impls = BuildImpls(o);

  CudaStream stream;
  BENCH_CHECK(CreateCudaStream(&stream));
  const CudaDeviceMemory flush = AllocateDevice(2 * dev.l2_bytes);
  const CudaDeviceMemory sink = AllocateDevice(16);
  BENCH_CHECK(cudaMemset(flush.get(), 0, 2 * dev.l2_bytes));
  std::printf("\n%-28s %7s %-22s %9s %9s %8s %6s %9s %8s %6s %5s %6s\n", "impl", "batch", "variant",
              "cold_us", "cold_min", "GB/s", "%peak", "graph_us", "GB/s", "%peak", "sets", "check");
  for (const std::int64_t batch : o.batches) {
    const Workload w = MakeWorkload(o, dev, batch, stream.get());
    for (const Impl& impl : impls) RunImpl(o, dev, w, impl, flush, sink, stream.get());
  }
  return 0;
}

}  // namespace
}  // namespace kerneleval

int main(int argc, char** argv) { return kerneleval::Main(argc, argv); }
