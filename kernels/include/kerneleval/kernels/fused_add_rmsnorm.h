// Fused residual-add + RMSNorm: the operation, independent of any transport.
//
//   s            = hidden_states + residual              (fp32)
//   output       = s * rsqrt(mean(s^2) + eps) * weight   (fp32, rounded once to the dtype)
//   residual_out = s                                     (rounded once to the dtype)
//
// Numerics: the sum is never rounded to the storage dtype before it is used; the variance
// and the normalization read the fp32 sum, and each output element is rounded exactly once.
// This matches the FlashInfer-Bench reference for `fused_add_rmsnorm_h2048`.
//
// Layout: row-major [batch, hidden], contiguous; weight is [hidden]. All pointers refer to
// memory of the device the entry point runs on. The header has no dependency on CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kerneleval {

enum class DType : int { kBF16 = 0, kFP16 = 1, kFP32 = 2 };

enum class Mode : int {
  kOutput = 0,             // writes output only
  kOutputAndResidual = 1,  // writes output and residual_out (separate buffers)
  kInPlace = 2,            // output aliases hidden_states, residual_out aliases residual
};

constexpr std::size_t ElementSize(DType dtype) { return dtype == DType::kFP32 ? 4 : 2; }
constexpr bool WritesResidual(Mode mode) { return mode != Mode::kOutput; }
const char* DTypeName(DType dtype);
const char* ModeName(Mode mode);

// Bytes that must cross memory for one call: each declared tensor once.
// OUTPUT: 3*B*H + H elements; OUTPUT_AND_RESIDUAL and IN_PLACE: 4*B*H + H.
std::uint64_t BytesMoved(DType dtype, Mode mode, std::int64_t batch, std::int64_t hidden);

struct FusedAddRmsNormArgs {
  DType dtype = DType::kBF16;
  Mode mode = Mode::kOutput;
  std::int64_t batch = 0;
  std::int64_t hidden = 0;
  float eps = 1e-6f;
  const void* hidden_states = nullptr;  // [batch, hidden]
  const void* residual = nullptr;       // [batch, hidden]
  const void* weight = nullptr;         // [hidden]
  void* output = nullptr;               // [batch, hidden]; == hidden_states for kInPlace
  void* residual_out = nullptr;  // [batch, hidden]; nullptr for kOutput; == residual for kInPlace
};

class CpuThreadPool;  // cpu_thread_pool.h

// Host implementation: fp32 arithmetic, one rounding per element. Pointers are host memory.
// SIMD code for the best instruction set of the running CPU (cpu_simd.h). Rows of large calls
// are spread over `threads` (nullptr: the calling thread only); a row's result is the same
// on any thread and in any batch. Thread-safe.
void FusedAddRmsNormCpu(const FusedAddRmsNormArgs& args, CpuThreadPool* threads = nullptr);

// Unfused host baseline: pass 1 writes the rounded sum to `scratch` ([batch, hidden] of the
// dtype), pass 2 normalizes it. It models what an eager framework does (two passes over the
// whole tensor, the sum rounded in between), so its numerics differ from the fused path
// within the tolerance.
void UnfusedAddRmsNormCpu(const FusedAddRmsNormArgs& args, void* scratch,
                          CpuThreadPool* threads = nullptr);

// fp64 reference from the (already rounded) input values: out and res are [batch, hidden]
// doubles; res may be nullptr.
void FusedAddRmsNormReference(DType dtype, std::int64_t batch, std::int64_t hidden, double eps,
                              const void* hidden_states, const void* residual, const void* weight,
                              double* out, double* res);

}  // namespace kerneleval
