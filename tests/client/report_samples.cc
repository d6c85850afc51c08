// The hand-built report of the client's format tests (report_samples.h).
#include "tests/client/report_samples.h"

#include <cstdint>
#include <string>

namespace kerneleval::client {

v1::BenchmarkReport SampleReport() {
  v1::BenchmarkReport report;
  report.set_suite("fused_add_rmsnorm_h2048");
  v1::SuiteDefinition* def = report.mutable_definition();
  def->set_name("fused_add_rmsnorm_h2048");
  def->set_dtype(v1::DTYPE_BF16);
  def->set_mode(v1::MODE_OUTPUT);
  v1::Axis* batch = def->add_axes();
  batch->set_name("batch_size");
  v1::Axis* hidden = def->add_axes();
  hidden->set_name("hidden_size");
  hidden->set_is_const(true);
  hidden->set_value(2048);
  report.mutable_protocol()->set_cache(v1::CACHE_MODE_COLD);
  report.mutable_protocol()->set_cuda_graph(true);
  report.mutable_protocol()->set_graph_calls(20);
  report.mutable_protocol()->set_repetitions(50);

  const char* impls[] = {"fused", "unfused"};
  const int64_t batches[] = {1, 79, 16254};
  for (int64_t b : batches) {
    for (int i = 0; i < 2; ++i) {
      v1::WorkloadResult* r = report.add_results();
      r->set_workload("batch_size=" + std::to_string(b));
      (*r->mutable_axes())["batch_size"] = b;
      r->set_implementation(impls[i]);
      r->set_device("cuda:0");
      r->set_status(v1::RESULT_STATUS_PASSED);
      r->set_timer(v1::TIMER_CUPTI);
      const double median = 4e-6 * (1 + b / 100.0) * (i + 1);
      r->mutable_latency()->set_samples(50);
      r->mutable_latency()->set_median_seconds(median);
      r->mutable_latency()->set_mean_seconds(median * 1.01);
      r->mutable_latency()->set_min_seconds(median * 0.98);
      r->mutable_latency()->set_p99_seconds(median * 1.1);
      r->set_bytes_moved(static_cast<uint64_t>(3 * b * 2048 * 2 + 2048 * 2));
      r->set_bytes_per_second(r->bytes_moved() / median);
      v1::SolFigure* datasheet = r->add_sol();
      datasheet->set_source(v1::PEAK_SOURCE_DATASHEET);
      datasheet->set_peak_bytes_per_second(4.8e12);
      datasheet->set_sol_ratio(0.5);
      v1::SolFigure* attrs = r->add_sol();
      attrs->set_source(v1::PEAK_SOURCE_DEVICE_ATTRIBUTES);
      attrs->set_peak_bytes_per_second(4.814e12);
      attrs->set_sol_ratio(0.68 / (i + 1));
      r->mutable_correctness()->set_checked(true);
      r->mutable_correctness()->set_passed(true);
      r->mutable_correctness()->set_max_abs_error(3.9e-3);
      r->set_rank(i + 1);
      r->set_vs_best(i + 1.0);
    }
  }
  for (int i = 0; i < 2; ++i) {
    v1::ImplementationSummary* s = report.add_summaries();
    s->set_implementation(impls[i]);
    s->set_device("cuda:0");
    s->set_rank(i + 1);
    s->set_mean_latency_seconds(5e-6 * (i + 1));
    s->set_geomean_sol_ratio(0.6 / (i + 1));
    s->set_vs_best(i + 1.0);
    s->set_passed(3);
  }
  v1::Environment* env = report.add_environments();
  env->mutable_device()->set_name("cuda:0");
  env->mutable_device()->set_model("NVIDIA H200");
  env->mutable_device()->set_uuid("GPU-1234");
  env->set_driver_version("580.65");
  env->set_cuda_runtime_version("13.0");
  env->set_clocks_available(true);
  env->mutable_clocks_before()->set_sm_mhz(1980);
  env->mutable_clocks_after()->set_sm_mhz(1980);
  env->set_server_version("0.1.0");
  env->set_git_revision("abc123");
  env->set_timestamp("2026-01-01T00:00:00Z");
  env->set_cupti_status("CUPTI activity API");
  for (double wait : {2.5, 0.0, 0.014}) env->add_host_wait_seconds(wait);
  env->set_workloads_prepared_ahead(2);
  report.set_wall_seconds(12.5);
  report.set_complete(true);
  return report;
}

// A profile as the server sends it: figures derived, advice given.
void AddSampleProfile(v1::WorkloadResult* r) {
  v1::ProfileReport* p = r->mutable_profile();
  p->set_available(true);
  p->set_source("CUPTI range profiler on GH100: a range per kernel, 14 replays of one call");
  v1::KernelProfile* k = p->add_kernels();
  k->set_name("void kerneleval::AddRmsNorm<__nv_bfloat16, 8>(Params)");
  for (std::uint32_t g : {132u, 1u, 1u}) k->mutable_launch()->add_grid(g);
  for (std::uint32_t b : {256u, 1u, 1u}) k->mutable_launch()->add_block(b);
  k->mutable_launch()->set_registers_per_thread(40);
  k->set_duration_seconds(5e-6);
  k->mutable_throughput()->set_dram_pct(83);
  k->mutable_throughput()->set_memory_pct(83);
  k->mutable_throughput()->set_sm_pct(21);
  k->mutable_memory()->set_dram_read_bytes(8.4e6);
  k->mutable_memory()->set_dram_write_bytes(5.5e6);
  k->mutable_memory()->set_declared_read_bytes(8'400'000);
  k->mutable_memory()->set_dram_read_vs_declared(1.0);
  k->mutable_memory()->set_declared_bytes(12'600'000);
  k->mutable_memory()->set_dram_vs_declared(13.9e6 / 12.6e6);
  k->mutable_memory()->set_load_sectors_per_request(16);
  k->mutable_occupancy()->set_theoretical_pct(100);
  k->mutable_occupancy()->set_achieved_pct(71);
  k->mutable_occupancy()->add_limited_by("warps");
  const struct {
    const char* reason;
    double share_pct, cycles_per_instruction;
  } stalls[] = {{"long_scoreboard", 64, 9.5},
                {"wait", 14, 2.1},
                {"math_pipe_throttle", 9, 1.3},
                {"short_scoreboard", 5, 0.7}};
  for (const auto& stall : stalls) {
    v1::WarpStall* s = k->add_stalls();
    s->set_reason(stall.reason);
    s->set_share_pct(stall.share_pct);
    s->set_cycles_per_instruction(stall.cycles_per_instruction);
  }
  v1::RooflinePoint* roof = k->mutable_roofline();
  roof->set_flops(1.2e7);
  // 1.39e7 bytes in 5 us: 2.78e12 B/s, the 83% of the DRAM peak above.
  roof->set_dram_bytes(1.39e7);
  roof->set_arithmetic_intensity(1.2e7 / 1.39e7);
  roof->set_flops_per_second(1.2e7 / 5e-6);
  roof->set_peak_flops_per_second(6.7e13);
  roof->set_peak_dram_bytes_per_second(3.35e12);
  roof->set_ridge_point(20);
  roof->set_attainable_flops_per_second(3.35e12 * 1.2e7 / 1.39e7);
  roof->set_bound("memory");
  v1::ProfileAdvice* a = k->add_advice();
  a->set_rule("at_memory_roof");
  a->set_text("DRAM at 83% of its peak");
  a->set_figure("throughput.dram_pct");
  a->set_value(83);
  v1::SourceLines* lines = k->mutable_source_lines();
  lines->set_available(true);
  lines->set_samples(1000);
  lines->set_calls(20);
  v1::SourceLine* line = lines->add_lines();
  line->set_file("submission.cu");
  line->set_line(14);
  line->set_samples(380);
  line->set_share_pct(38);
  v1::LineReason* reason = line->add_reasons();
  reason->set_reason("long_scoreboard");
  reason->set_samples(300);
}

}  // namespace kerneleval::client
