// Command line of kerneleval-kernel-bench: what to run and how to time it.
#pragma once

#include <cstdint>
#include <vector>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {
namespace bench {

struct Options {
  DType dtype = DType::kBF16;
  Mode mode = Mode::kOutput;
  std::int64_t hidden = 2048;
  std::vector<std::int64_t> batches = {1, 6, 34, 64, 79, 12383, 16254};
  int reps = 100;
  int graph_calls = 50;
  int graph_replays = 20;
  bool read_flush = false;
  bool sweep = false;
  bool split_sweep = false;  // only the split layouts (SplitRowKernel) beside the default
  bool unfused = true;
  bool copy = false;  // also time device-to-device copies of the same bytes
  bool ncu = false;   // launches only, for a profiler that times each kernel itself
};

// Fills `o` from the flags; false on an unknown flag, a bad value, or a non-positive size.
bool Parse(int argc, char** argv, Options* o);

// The flags and what --ncu does, on stderr.
void Usage();

}  // namespace bench
}  // namespace kerneleval
