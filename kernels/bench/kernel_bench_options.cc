#include "kernel_bench_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kerneleval {
namespace bench {
namespace {

bool ParseDType(const std::string& s, DType* d) {
  if (s == "bf16")
    *d = DType::kBF16;
  else if (s == "fp16")
    *d = DType::kFP16;
  else if (s == "fp32")
    *d = DType::kFP32;
  else
    return false;
  return true;
}

bool ParseMode(const std::string& s, Mode* m) {
  if (s == "output")
    *m = Mode::kOutput;
  else if (s == "output_and_residual")
    *m = Mode::kOutputAndResidual;
  else if (s == "in_place")
    *m = Mode::kInPlace;
  else
    return false;
  return true;
}

}  // namespace

void Usage() {
  std::fprintf(stderr,
               "usage: kerneleval-kernel-bench [--dtype=bf16|fp16|fp32] "
               "[--mode=output|output_and_residual|in_place] [--hidden=N] "
               "[--batches=1,6,...] [--reps=N] [--graph-calls=N] [--flush=memset|read] "
               "[--sweep] [--split-sweep] [--copy] [--no-unfused] [--ncu]\n"
               "--ncu: no timing; each implementation runs 5 synchronized calls per batch, in the\n"
               "order printed, for Nsight Compute (which flushes caches and times each kernel)\n");
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--dtype") {
      if (!ParseDType(value, &o->dtype)) return false;
    } else if (key == "--mode") {
      if (!ParseMode(value, &o->mode)) return false;
    } else if (key == "--hidden") {
      o->hidden = std::atoll(value.c_str());
    } else if (key == "--batches") {
      o->batches.clear();
      for (std::size_t pos = 0; pos < value.size();) {
        const std::size_t comma = value.find(',', pos);
        o->batches.push_back(std::atoll(value.substr(pos, comma - pos).c_str()));
        pos = comma == std::string::npos ? value.size() : comma + 1;
      }
    } else if (key == "--reps") {
      o->reps = std::atoi(value.c_str());
    } else if (key == "--graph-calls") {
      o->graph_calls = std::atoi(value.c_str());
    } else if (key == "--flush") {
      if (value != "memset" && value != "read") return false;
      o->read_flush = value == "read";
    } else if (key == "--sweep") {
      o->sweep = true;
    } else if (key == "--split-sweep") {
      o->split_sweep = true;
    } else if (key == "--copy") {
      o->copy = true;
    } else if (key == "--no-unfused") {
      o->unfused = false;
    } else if (key == "--ncu") {
      o->ncu = true;
    } else {
      return false;
    }
  }
  return o->hidden >= 1 && o->reps >= 1 && o->graph_calls >= 1 && !o->batches.empty() &&
         std::all_of(o->batches.begin(), o->batches.end(), [](std::int64_t b) { return b >= 1; });
}

}  // namespace bench
}  // namespace kerneleval
