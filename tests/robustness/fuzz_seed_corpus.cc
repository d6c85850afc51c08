// Writes a few small valid requests, serialized, into DIR as seeds for
// fuzz_request_validation: Runs of each dtype and mode (tiny tensors), and Benchmarks with
// custom suites and protocols (fixed, adaptive, graph).
//
// Usage: fuzz_seed_corpus DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "kerneleval/v1/kerneleval.pb.h"

namespace v1 = kerneleval::v1;

namespace {

void Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out << bytes;
}

v1::Tensor MakeTensor(v1::DType dtype, std::initializer_list<std::int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(dtype);
  std::size_t n = dtype == v1::DTYPE_FP32 ? 4 : 2;
  for (auto s : shape) {
    t.add_shape(s);
    n *= static_cast<std::size_t>(s);
  }
  std::string data(n, '\0');
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 37 + 11);
  t.set_data(data);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int index = 0;
  for (v1::DType dtype : {v1::DTYPE_BF16, v1::DTYPE_FP16, v1::DTYPE_FP32}) {
    for (v1::Mode mode : {v1::MODE_OUTPUT, v1::MODE_OUTPUT_AND_RESIDUAL, v1::MODE_IN_PLACE}) {
      v1::RunRequest r;
      *r.mutable_hidden_states() = MakeTensor(dtype, {2, 3});
      *r.mutable_residual() = MakeTensor(dtype, {2, 3});
      *r.mutable_weight() = MakeTensor(dtype, {3});
      r.set_mode(mode);
      if (index % 2 == 0) r.set_eps(1e-5);
      r.set_repetitions(static_cast<std::uint32_t>(index % 3));
      r.set_device(index % 4 == 0 ? "cpu" : "");
      Write(dir, "run-" + std::to_string(index++), r.SerializeAsString());
    }
  }
  for (int variant = 0; variant < 4; ++variant) {
    v1::BenchmarkRequest b;
    v1::SuiteDefinition* s = b.mutable_custom_suite();
    s->set_name("seed");
    s->set_dtype(variant % 2 ? v1::DTYPE_FP16 : v1::DTYPE_BF16);
    s->set_mode(static_cast<v1::Mode>(variant));
    s->set_eps(1e-6);
    v1::Axis* batch = s->add_axes();
    batch->set_name("batch_size");
    v1::Axis* hidden = s->add_axes();
    hidden->set_name("hidden_size");
    if (variant == 3) {
      (*s->add_workloads()->mutable_axes())["hidden_size"] = 8;
      batch->set_is_const(true);
      batch->set_value(4);
    } else {
      hidden->set_is_const(true);
      hidden->set_value(64);
      for (int batch_size : {1, 7}) {
        v1::Workload* w = s->add_workloads();
        (*w->mutable_axes())["batch_size"] = batch_size;
        w->mutable_tolerance()->set_atol(1e-2);
        w->mutable_tolerance()->set_required_matched_ratio(0.99);
      }
    }
    v1::Protocol* p = b.mutable_protocol();
    p->set_warmup(1);
    p->set_repetitions(3);
    if (variant == 1) {
      p->mutable_adaptive()->set_min_samples(5);
      p->mutable_adaptive()->set_max_samples(50);
      p->mutable_adaptive()->set_target_relative_spread(0.01);
    }
    if (variant == 2) {
      p->set_cuda_graph(true);
      p->set_graph_calls(10);
      p->set_timer(v1::TIMER_CUDA_EVENTS);
    }
    p->set_cache(variant % 2 ? v1::CACHE_MODE_HOT : v1::CACHE_MODE_COLD);
    p->set_max_total_seconds(30);
    b.add_implementations("cpu_fused");
    Write(dir, "benchmark-" + std::to_string(variant), b.SerializeAsString());
  }
  v1::BenchmarkRequest named;
  named.set_suite("fused_add_rmsnorm_h2048");
  Write(dir, "benchmark-named", named.SerializeAsString());
  return 0;
}
