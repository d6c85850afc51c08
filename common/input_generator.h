// Deterministic benchmark inputs.
//
// A tensor is a pure function of (dtype, element count, seed): the same bytes on every
// platform, compiler and standard library, so that a workload means the same data on a
// laptop and on a GPU node. Values are standard normal (mean 0, variance 1), like torch.randn
// in SOL-ExecBench and FlashInfer-Bench, drawn from splitmix64 with the Box-Muller transform
// (std::normal_distribution is not used: its algorithm differs between standard libraries).
// Pure functions; safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {

// `elements` normal(0, 1) values, each rounded once (to nearest even) from double to `dtype`,
// as little-endian bytes: elements * ElementSize(dtype) bytes. Element i depends only on the
// seed and i, so a prefix of a longer tensor equals the shorter tensor.
std::vector<std::uint8_t> RandomTensor(DType dtype, std::size_t elements, std::uint64_t seed);

// Writes elements [begin, end) of RandomTensor(dtype, n, seed), for any n >= end, at their
// positions in `out` (the whole tensor's buffer: element i lands at byte i * ElementSize).
// Disjoint ranges can be filled from different threads; large tensors take about 25 ns per
// element pair on one core (libm log and sincos dominate).
void FillRandom(DType dtype, std::size_t begin, std::size_t end, std::uint64_t seed, void* out);

// The seed of one tensor of one workload: a hash of the base seed (the suite's or the
// workload's), the tensor name ("hidden_states", "residual", "weight") and the workload's
// index, so that tensors and workloads never share a stream. Stable across releases: changing
// it changes every benchmark input.
std::uint64_t DeriveSeed(std::uint64_t base, std::string_view tensor_name,
                         std::uint64_t workload_index);

}  // namespace kerneleval
