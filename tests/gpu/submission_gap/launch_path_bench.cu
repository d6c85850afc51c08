// Where a submitted kernel's extra time per call in graph replay comes from. One row kernel
// (lean_rows_probe<0> of direct_rows.cu, bf16, hidden 2048, a CTA of 128 threads per row,
// PDL) is built and launched every way that separates the service's path from the
// built-in's, and timed beside cuda_fused in one process, the variants interleaved sample by
// sample, all writing one output buffer:
//   compiler        nvcc (linked into this binary, as cuda_fused is) or NVRTC at run time
//                   with the service's options (NvrtcOptions);
//   launch          cudaLaunchKernelEx (the runtime, as cuda_fused), cuLaunchKernelEx on the
//                   CUfunction of a module (cuModuleLoadData: the service's
//                   SubmissionLauncher) or on the CUkernel of a library (cuLibraryLoadData:
//                   how the runtime loads its own kernels);
//   parameters      kerneleval_params (144 bytes, the ABI), the 56 bytes the row reads,
//                   those 56 padded to 64-256 bytes (the block's size alone), or the same
//                   fields at their offsets in ABI version 2 in 72 bytes (where they lie).
// The example submission (fused_rows_vec16<0>) runs both ways too. Protocol: the service's
// graph replay, hot: --graph-calls launches captured once, each sample one replay between
// two events behind a device spin (so that the host's cudaGraphLaunch is not in the window),
// per-call time = elapsed / calls, median of --samples. Every variant's output is compared
// with cuda_fused's before timing.
//
//   launch_path_bench --cuda-include /usr/local/cuda/include --source-dir .
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "kerneleval/kernels/fused_add_rmsnorm_cuda.h"
#include "launch_path_nvrtc.h"

// The kernels as nvcc builds them, from the same files NVRTC compiles below.
#include "../../../examples/submissions/fused_rows_vec16.cu"
#include "direct_rows.cu"
#include "early_prologue_rows.cu"
#include "small_params_rows.cu"

namespace {

using kerneleval::DType;
using kerneleval::FusedAddRmsNormArgs;
using kerneleval::Mode;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "launch_path_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorName(e));
}

void CheckCu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) Die(std::string(what) + ": CUresult " + std::to_string(r));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(std::size_t bytes) { Check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { cudaFree(p); }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { Check(cudaEventCreate(&e), "cudaEventCreate"); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e); }
};

struct GraphExec {
  cudaGraphExec_t g = nullptr;
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  GraphExec(GraphExec&& o) noexcept : g(o.g) { o.g = nullptr; }
  ~GraphExec() {
    if (g != nullptr) cudaGraphExecDestroy(g);
  }
};

// Keeps the stream busy for `ns` so that the start event, the replay and the stop event
// are all queued before the first of them runs.
__global__ void Spin(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// The driver calls, resolved here rather than through server/driver/cuda_driver.h: that header
// brings Abseil into this nvcc-compiled file, and it lacks the cuLibrary* calls compared
// below. Same entry points and versions as the service's CudaDriver.
template <typename Fn>
Fn ResolveDriver(const char* symbol, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  Check(cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found), symbol);
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) Die(std::string("no ") + symbol);
  return reinterpret_cast<Fn>(fn);
}

// One launch of a row kernel: a CTA of 128 threads per row, PDL.
using LaunchFn = std::function<void(const FusedAddRmsNormArgs&, cudaStream_t)>;

constexpr unsigned kBlock = 128;

template <typename Params>
void RuntimeLaunch(void (*kernel)(Params), const Params& params, std::int64_t batch,
                   cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(batch));
  config.blockDim = dim3(kBlock);
  config.stream = stream;
  cudaLaunchAttribute pdl = {};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &pdl;
  config.numAttrs = 1;
  Check(cudaLaunchKernelEx(&config, kernel, params), "cudaLaunchKernelEx");
}

// Resolved as the service's CudaDriver resolves it (server/driver/cuda_driver.cc).
PFN_cuLaunchKernelEx_v11060 LaunchKernelEx() {
  static const auto fn = ResolveDriver<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", 11060);
  return fn;
}

void DriverLaunch(CUfunction f, void* params, std::int64_t batch, cudaStream_t stream) {
  CUlaunchAttribute pdl = {};
  pdl.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  pdl.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config = {};
  config.gridDimX = static_cast<unsigned>(batch);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = kBlock;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = &pdl;
  config.numAttrs = 1;
  void* args[] = {params};
  CheckCu(LaunchKernelEx()(&config, f, args, nullptr), "cuLaunchKernelEx");
}

kerneleval_params AbiParams(const FusedAddRmsNormArgs& a, int sm_count) {
  return kerneleval::launch_path::ServiceParams(a, sm_count);
}

lean_params SmallParams(const FusedAddRmsNormArgs& a) {
  return {a.hidden_states, a.residual, a.weight, a.output, a.batch, a.hidden, a.eps};
}

// The lean row from a block padded to kBytes: the cost of the block's size alone.
template <int kBytes>
struct padded_params {
  lean_params p;
  char pad[kBytes - sizeof(lean_params)];
};
template <int kBytes>
__global__ void __launch_bounds__(128) lean_rows_padded(const padded_params<kBytes> p) {
  LeanRow<0>(p.p);
}

template <int kBytes>
void PaddedLaunch(const FusedAddRmsNormArgs& a, cudaStream_t stream) {
  padded_params<kBytes> p = {};
  p.p = SmallParams(a);
  RuntimeLaunch(lean_rows_padded<kBytes>, p, a.batch, stream);
}

struct Variant {
  std::string name;
  LaunchFn launch;
};

float Bf16ToFloat(unsigned short v) {
  const unsigned bits = static_cast<unsigned>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A submitted row kernel's launch paths against cuda_fused, graph replay"};
  std::string cuda_include = "/usr/local/cuda/include";
  std::string source_dir = ".";
  std::vector<std::int64_t> batches = {1, 6, 34, 79};
  int samples = 200;
  int graph_calls = 50;
  app.add_option("--cuda-include", cuda_include, "the CUDA toolkit's include directory");
  app.add_option("--source-dir", source_dir, "the repository root (examples/, tests/, kernels/)");
  app.add_option("--batches", batches, "batch sizes (hidden 2048, bf16)")->delimiter(',');
  app.add_option("--samples", samples, "timed replays per variant and batch")
      ->check(CLI::Range(1, 100000));
  app.add_option("--graph-calls", graph_calls, "launches per graph")->check(CLI::Range(1, 1000));
  std::string cubin_out;
  app.add_option("--cubin-out", cubin_out, "write NVRTC's cubin here (to disassemble)");
  CLI11_PARSE(app, argc, argv);
  constexpr std::int64_t kHidden = 2048;

  Check(cudaFree(nullptr), "cudaFree(0)");
  int device = 0, major = 0, minor = 0, sms = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cc");
  Check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cc");
  Check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "sms");

  // The same three files nvcc built into this binary, compiled as a submission would be.
  const std::string gap_dir = source_dir + "/tests/gpu/submission_gap/";
  const std::string source = ReadFile(source_dir + "/examples/submissions/fused_rows_vec16.cu") +
                             ReadFile(gap_dir + "direct_rows.cu") +
                             ReadFile(gap_dir + "small_params_rows.cu") +
                             ReadFile(gap_dir + "early_prologue_rows.cu");
  const std::vector<std::string> entries = {
      "lean_rows_probe<0>", "lean_rows_small",  "fused_rows_vec16<0>", "early_rows<0, 1>",
      "early_rows<0, 2>",   "early_rows<0, 3>", "lean_rows_early"};
  const kerneleval::launch_path::NvrtcBuild nvrtc = kerneleval::launch_path::CompileLikeTheService(
      source, entries, major, minor, cuda_include, source_dir + "/kernels/include");
  std::printf("NVRTC:\n%s", nvrtc.resources.c_str());
  if (!cubin_out.empty()) std::ofstream(cubin_out, std::ios::binary) << nvrtc.cubin;
  const auto module_load = ResolveDriver<PFN_cuModuleLoadData_v2000>("cuModuleLoadData", 2000);
  const auto module_function =
      ResolveDriver<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction", 2000);
  CUmodule module = nullptr;
  CheckCu(module_load(&module, nvrtc.cubin.data()), "cuModuleLoadData");
  std::vector<CUfunction> module_fn(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    CheckCu(module_function(&module_fn[i], module, nvrtc.lowered[i].c_str()),
            "cuModuleGetFunction");
  }
  const auto library_load = ResolveDriver<PFN_cuLibraryLoadData_v12000>("cuLibraryLoadData", 12000);
  const auto library_kernel =
      ResolveDriver<PFN_cuLibraryGetKernel_v12000>("cuLibraryGetKernel", 12000);
  CUlibrary library = nullptr;
  CheckCu(library_load(&library, nvrtc.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cuLibraryLoadData");
  CUkernel library_lean = nullptr;
  CheckCu(library_kernel(&library_lean, library, nvrtc.lowered[0].c_str()), "cuLibraryGetKernel");
  cudaFunction_t nvcc_lean = nullptr;
  Check(cudaGetFuncBySymbol(&nvcc_lean, reinterpret_cast<const void*>(lean_rows_probe<0>)),
        "cudaGetFuncBySymbol");
  cudaFuncAttributes attributes = {};
  Check(cudaFuncGetAttributes(&attributes, lean_rows_probe<0>), "cudaFuncGetAttributes");
  std::printf("nvcc: lean_rows_probe<0> %d registers; ", attributes.numRegs);
  Check(cudaFuncGetAttributes(&attributes, fused_rows_vec16<KERNELEVAL_DTYPE_BF16>), "attrs");
  std::printf("fused_rows_vec16<0> %d registers\n", attributes.numRegs);

  std::vector<Variant> variants = {
      {"cuda_fused (built-in launcher)",
       [](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         Check(kerneleval::LaunchFusedAddRmsNorm(a, s), "LaunchFusedAddRmsNorm");
       }},
      {"lean, nvcc, runtime, 56 B",
       [](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(lean_rows_small, SmallParams(a), a.batch, s);
       }},
      {"lean, nvcc, runtime, ABI",
       [sms](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(lean_rows_probe<0>, AbiParams(a, sms), a.batch, s);
       }},
      {"lean, nvcc, cuLaunchKernelEx, ABI",
       [sms, nvcc_lean](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         kerneleval_params p = AbiParams(a, sms);
         DriverLaunch(reinterpret_cast<CUfunction>(nvcc_lean), &p, a.batch, s);
       }},
      {"lean, NVRTC, library kernel, ABI",
       [sms, library_lean](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         kerneleval_params p = AbiParams(a, sms);
         DriverLaunch(reinterpret_cast<CUfunction>(library_lean), &p, a.batch, s);
       }},
      {"lean, NVRTC, module, 56 B",
       [f = module_fn[1]](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         lean_params p = SmallParams(a);
         DriverLaunch(f, &p, a.batch, s);
       }},
      {"lean, NVRTC, module, ABI (the service)",
       [sms, f = module_fn[0]](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         kerneleval_params p = AbiParams(a, sms);
         DriverLaunch(f, &p, a.batch, s);
       }},
      {"example, nvcc, runtime, ABI",
       [sms](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(fused_rows_vec16<KERNELEVAL_DTYPE_BF16>, AbiParams(a, sms), a.batch, s);
       }},
      {"example, NVRTC, module, ABI (the service)",
       [sms, f = module_fn[2]](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         kerneleval_params p = AbiParams(a, sms);
         DriverLaunch(f, &p, a.batch, s);
       }},
  };
  // The example with its prologue before the PDL wait (early_prologue_rows.cu), both builds.
  const std::vector<Variant> early = {
      {"example, step 1 (bound before the wait), nvcc",
       [sms](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(early_rows<KERNELEVAL_DTYPE_BF16, 1>, AbiParams(a, sms), a.batch, s);
       }},
      {"example, step 2 (+ thread 0 prefetches w), nvcc",
       [sms](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(early_rows<KERNELEVAL_DTYPE_BF16, 2>, AbiParams(a, sms), a.batch, s);
       }},
      {"example, step 3 (every thread prefetches w), nvcc",
       [sms](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(early_rows<KERNELEVAL_DTYPE_BF16, 3>, AbiParams(a, sms), a.batch, s);
       }},
      {"lean, step 2's prologue, nvcc",
       [sms](const FusedAddRmsNormArgs& a, cudaStream_t s) {
         RuntimeLaunch(lean_rows_early, AbiParams(a, sms), a.batch, s);
       }},
  };
  variants.insert(variants.end(), early.begin(), early.end());
  for (std::size_t i = 3; i < entries.size(); ++i) {
    variants.push_back({entries[i] + ", NVRTC, module (the service)",
                        [sms, f = module_fn[i]](const FusedAddRmsNormArgs& a, cudaStream_t s) {
                          kerneleval_params p = AbiParams(a, sms);
                          DriverLaunch(f, &p, a.batch, s);
                        }});
  }
  const std::vector<Variant> padded = {
      {"lean, nvcc, runtime, 64 B", PaddedLaunch<64>},
      {"lean, nvcc, runtime, 72 B", PaddedLaunch<72>},
      {"lean, nvcc, runtime, 80 B", PaddedLaunch<80>},
      {"lean, nvcc, runtime, 96 B", PaddedLaunch<96>},
      {"lean, nvcc, runtime, 112 B", PaddedLaunch<112>},
      {"lean, nvcc, runtime, 128 B", PaddedLaunch<128>},
      {"lean, nvcc, runtime, 136 B", PaddedLaunch<136>},
      {"lean, nvcc, runtime, 256 B", PaddedLaunch<256>},
  };
  variants.insert(variants.end(), padded.begin(), padded.end());
  variants.push_back({"lean, nvcc, runtime, 72 B, fields at ABI 2's offsets",
                      [](const FusedAddRmsNormArgs& a, cudaStream_t s) {
                        lean_params_abi_offsets p = {};
                        p.hidden_states = a.hidden_states;
                        p.residual = a.residual;
                        p.weight = a.weight;
                        p.output = a.output;
                        p.batch = a.batch;
                        p.hidden = a.hidden;
                        p.eps = a.eps;
                        RuntimeLaunch(lean_rows_abi_offsets, p, a.batch, s);
                      }});

  const std::int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  const std::size_t tensor = static_cast<std::size_t>(max_batch * kHidden) * 2;
  // One output buffer for every variant: where a buffer lies must not differ between them.
  DeviceMemory x(tensor), r(tensor), w(kHidden * 2), out(tensor);
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<__nv_bfloat16> host(static_cast<std::size_t>(max_batch * kHidden));
    for (DeviceMemory* m : {&x, &r}) {
      for (auto& v : host) v = __float2bfloat16(normal(rng));
      Check(cudaMemcpy(m->p, host.data(), tensor, cudaMemcpyHostToDevice), "copy");
    }
    for (std::int64_t i = 0; i < kHidden; ++i) host[i] = __float2bfloat16(1.f + 0.1f * normal(rng));
    Check(cudaMemcpy(w.p, host.data(), kHidden * 2, cudaMemcpyHostToDevice), "copy");
  }
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Event start, stop;

  std::printf("\nGraph replay, hot, %d launches per graph, median of %d replays, us per call\n",
              graph_calls, samples);
  std::printf("(max |diff| from cuda_fused's output in brackets)\n\n| variant |");
  for (std::int64_t b : batches) std::printf(" B=%lld |", static_cast<long long>(b));
  std::printf("\n|---|");
  for (std::size_t i = 0; i < batches.size(); ++i) std::printf("---:|");
  std::printf("\n");
  std::vector<std::vector<double>> medians(variants.size());
  std::vector<std::vector<float>> diffs(variants.size());
  for (std::int64_t batch : batches) {
    auto args_for = [&]() {
      FusedAddRmsNormArgs a;
      a.dtype = DType::kBF16;
      a.mode = Mode::kOutput;
      a.batch = batch;
      a.hidden = kHidden;
      a.hidden_states = x.p;
      a.residual = r.p;
      a.weight = w.p;
      a.output = out.p;
      return a;
    };
    // Outputs first: a variant that computed something else would be timing other work.
    std::vector<unsigned short> ref(static_cast<std::size_t>(batch * kHidden)), got(ref.size());
    for (std::size_t v = 0; v < variants.size(); ++v) {
      Check(cudaMemsetAsync(out.p, 0xff, tensor, stream), "poison");
      variants[v].launch(args_for(), stream);
      Check(cudaStreamSynchronize(stream), variants[v].name.c_str());
      Check(cudaMemcpy((v == 0 ? ref : got).data(), out.p, ref.size() * 2, cudaMemcpyDeviceToHost),
            "copy back");
      float worst = 0.f;
      for (std::size_t i = 0; v > 0 && i < ref.size(); ++i) {
        const float d = std::fabs(Bf16ToFloat(ref[i]) - Bf16ToFloat(got[i]));
        worst = std::isnan(d) ? INFINITY : std::max(worst, d);
      }
      diffs[v].push_back(worst);
    }
    std::vector<GraphExec> graphs(variants.size());
    for (std::size_t v = 0; v < variants.size(); ++v) {
      Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
      for (int k = 0; k < graph_calls; ++k) variants[v].launch(args_for(), stream);
      cudaGraph_t graph = nullptr;
      Check(cudaStreamEndCapture(stream, &graph), "end capture");
      Check(cudaGraphInstantiate(&graphs[v].g, graph, 0), "instantiate");
      cudaGraphDestroy(graph);
      Check(cudaGraphLaunch(graphs[v].g, stream), "first replay");
    }
    Check(cudaStreamSynchronize(stream), "warm-up");
    std::vector<std::vector<double>> times(variants.size());
    for (int s = 0; s < samples; ++s) {
      for (std::size_t k = 0; k < variants.size(); ++k) {
        const std::size_t v = (k + static_cast<std::size_t>(s)) % variants.size();
        Spin<<<1, 1, 0, stream>>>(20000);
        Check(cudaEventRecord(start.e, stream), "record");
        Check(cudaGraphLaunch(graphs[v].g, stream), "replay");
        Check(cudaEventRecord(stop.e, stream), "record");
        Check(cudaEventSynchronize(stop.e), "sync");
        float ms = 0.f;
        Check(cudaEventElapsedTime(&ms, start.e, stop.e), "elapsed");
        times[v].push_back(1000.0 * ms / graph_calls);
      }
    }
    for (std::size_t v = 0; v < variants.size(); ++v) {
      std::sort(times[v].begin(), times[v].end());
      medians[v].push_back(times[v][times[v].size() / 2]);
    }
  }
  for (std::size_t v = 0; v < variants.size(); ++v) {
    std::printf("| %s |", variants[v].name.c_str());
    for (std::size_t b = 0; b < batches.size(); ++b) {
      const double delta = medians[v][b] - medians[0][b];
      if (v == 0) {
        std::printf(" %.3f |", medians[v][b]);
      } else {
        std::printf(" %.3f (%+.3f) [%.3g] |", medians[v][b], delta, diffs[v][b]);
      }
    }
    std::printf("\n");
  }
  cudaStreamDestroy(stream);
  return 0;
}
