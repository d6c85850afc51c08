// A profile's figures and rules (server/figures/kernel_profile.h) against numbers worked out
// by hand: the occupancy of launches on an H100 from its published limits (64 warps, 32
// blocks, 65,536 registers and 228 KiB of shared memory per SM, 1 KiB reserved per block),
// and the figures of counters recorded from real kernels (tests/core/fixtures).
#include "server/figures/kernel_profile.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

namespace kerneleval::server {
namespace {

v1::ProfileDevice H100() {
  v1::ProfileDevice d;
  d.set_name("NVIDIA H100 80GB HBM3");
  d.set_compute_major(9);
  d.set_compute_minor(0);
  d.set_sm_count(132);
  d.set_max_threads_per_sm(2048);
  d.set_max_blocks_per_sm(32);
  d.set_registers_per_sm(65536);
  d.set_registers_per_block(65536);
  d.set_shared_bytes_per_sm(233472);
  d.set_shared_bytes_per_block(49152);
  d.set_shared_bytes_per_block_optin(232448);
  d.set_reserved_shared_bytes_per_block(1024);
  d.set_max_threads_per_block(1024);
  d.set_warp_size(32);
  d.set_fp32_lanes_per_sm(128);
  d.set_peak_dram_bytes_per_second(3.35e12);
  d.set_sm_clock_khz_max(1980000);
  return d;
}

v1::ProfiledLaunch Launch(std::uint32_t grid, std::uint32_t block, std::uint32_t registers,
                          std::uint64_t dynamic_shared = 0) {
  v1::ProfiledLaunch l;
  for (std::uint32_t g : {grid, 1u, 1u}) l.add_grid(g);
  for (std::uint32_t b : {block, 1u, 1u}) l.add_block(b);
  l.set_registers_per_thread(registers);
  l.set_dynamic_shared_bytes(dynamic_shared);
  return l;
}

bool LimitedBy(const v1::ProfileOccupancy& o, const std::string& what) {
  for (const std::string& l : o.limited_by()) {
    if (l == what) return true;
  }
  return false;
}

TEST(KernelProfileOccupancy, FullWhenNothingCapsIt) {
  // 8 warps a block; 32 registers x 32 threads = 1,024 a warp, 64 warps' worth: 8 blocks by
  // warps and by registers alike, all 64 warps resident.
  const v1::ProfileOccupancy o = TheoreticalOccupancy(H100(), Launch(1056, 256, 32));
  EXPECT_EQ(o.blocks_per_sm(), 8u);
  EXPECT_DOUBLE_EQ(o.theoretical_pct(), 100.0);
  EXPECT_DOUBLE_EQ(o.waves(), 1.0);  // 1,056 blocks = 8 x 132
}

TEST(KernelProfileOccupancy, RegistersCapIt) {
  // 128 registers: 4,096 a warp, 16 warps' worth per SM, two blocks of 8 warps: 25%.
  const v1::ProfileOccupancy o = TheoreticalOccupancy(H100(), Launch(1000, 256, 128));
  EXPECT_EQ(o.blocks_per_sm(), 2u);
  EXPECT_EQ(o.blocks_by_registers(), 2u);
  EXPECT_DOUBLE_EQ(o.theoretical_pct(), 25.0);
  EXPECT_TRUE(LimitedBy(o, "registers"));
  EXPECT_FALSE(LimitedBy(o, "shared memory"));
}

TEST(KernelProfileOccupancy, SharedMemoryCapsIt) {
  // 100 KiB a block plus 1 KiB reserved: two blocks in 228 KiB, 4 warps each: 12.5%.
  const v1::ProfileOccupancy o = TheoreticalOccupancy(H100(), Launch(1000, 128, 32, 100 * 1024));
  EXPECT_EQ(o.blocks_per_sm(), 2u);
  EXPECT_DOUBLE_EQ(o.theoretical_pct(), 12.5);
  EXPECT_TRUE(LimitedBy(o, "shared memory"));
}

TEST(KernelProfileOccupancy, ASmallGridLeavesSmsIdle) {
  const v1::ProfileOccupancy o = TheoreticalOccupancy(H100(), Launch(6, 256, 32));
  EXPECT_TRUE(LimitedBy(o, "grid"));
  EXPECT_NEAR(o.waves(), 6.0 / (8 * 132), 1e-12);
}

// Counters of one kernel, as a device reports them.
v1::ProfileReport OneKernel(const std::map<std::string, double>& counters,
                            const v1::ProfiledLaunch& launch) {
  v1::ProfileReport r;
  r.set_available(true);
  *r.mutable_device() = H100();
  v1::KernelProfile* k = r.add_kernels();
  k->set_name("k");
  *k->mutable_launch() = launch;
  for (const auto& [name, value] : counters) (*k->mutable_counters())[name] = value;
  return r;
}

bool Fired(const v1::KernelProfile& k, const std::string& rule) {
  for (const v1::ProfileAdvice& a : k.advice()) {
    if (a.rule() == rule) return true;
  }
  return false;
}

TEST(KernelProfileFigures, AreTheCountersRatios) {
  v1::ProfileReport r = OneKernel({{"gpu__time_duration.sum", 2000},  // ns
                                   {"sm__cycles_elapsed.avg.per_second", 1.98e9},
                                   {"dram__bytes_read.sum", 8e6},
                                   {"dram__bytes_write.sum", 4e6},
                                   {"lts__t_sectors_op_read.sum", 250000},
                                   {"lts__t_sectors_op_write.sum", 125000},
                                   {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 250000},
                                   {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 62500},
                                   {"smsp__issue_active.sum", 1000},
                                   {"smsp__warps_issue_stalled_long_scoreboard.sum", 6000},
                                   {"smsp__warps_issue_stalled_barrier.sum", 2000},
                                   {"smsp__warps_issue_stalled_selected.sum", 1000},
                                   {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 1e6},
                                   {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1e6}},
                                  Launch(1056, 256, 32));
  DeriveProfile(8'000'000, 4'000'000, &r);
  const v1::KernelProfile& k = r.kernels(0);
  EXPECT_DOUBLE_EQ(k.duration_seconds(), 2e-6);
  EXPECT_DOUBLE_EQ(k.memory().l2_read_bytes(), 8e6);
  EXPECT_DOUBLE_EQ(k.memory().load_sectors_per_request(), 4.0);
  EXPECT_DOUBLE_EQ(k.memory().dram_vs_declared(), 1.0);
  EXPECT_DOUBLE_EQ(k.memory().dram_read_vs_declared(), 1.0);
  // Stalls by cycles, "selected" (the issue itself) left out, per issued instruction.
  ASSERT_EQ(k.stalls_size(), 2);
  EXPECT_EQ(k.stalls(0).reason(), "long_scoreboard");
  EXPECT_DOUBLE_EQ(k.stalls(0).cycles_per_instruction(), 6.0);
  EXPECT_DOUBLE_EQ(k.stalls(0).share_pct(), 75.0);
  // 3e6 operations (an FMA is two) over 12 MB; the FP32 roof at the clock under profile:
  // 128 lanes x 2 x 132 SMs x 1.98 GHz.
  EXPECT_DOUBLE_EQ(k.roofline().flops(), 3e6);
  EXPECT_DOUBLE_EQ(k.roofline().arithmetic_intensity(), 0.25);
  EXPECT_DOUBLE_EQ(k.roofline().peak_flops_per_second(), 128.0 * 2 * 132 * 1.98e9);
  EXPECT_EQ(k.roofline().bound(), "memory");
  EXPECT_DOUBLE_EQ(k.roofline().attainable_flops_per_second(), 0.25 * 3.35e12);
  EXPECT_TRUE(Fired(k, "narrow_loads"));  // 4 sectors a request: 128 bytes per warp
  EXPECT_TRUE(Fired(k, "waits_on_global_loads"));
}

// Reading more than the definition is called a re-read only where the surplus is more than
// what any launch reads besides its data (code, constants): 256 KiB.
TEST(KernelProfileRules, ReReadsAreFlaggedAboveALaunchsOwnReads) {
  for (const auto& [read, declared, fired] :
       {std::tuple{2e6, 1e6, true}, std::tuple{1e6 + 200e3, 100e3, true},
        std::tuple{100e3 + 200e3, 100e3, false}, std::tuple{1.2e6, 1e6, false}}) {
    SCOPED_TRACE(read);
    v1::ProfileReport r = OneKernel({{"dram__bytes_read.sum", read}}, Launch(1000, 256, 32));
    DeriveProfile(static_cast<std::uint64_t>(declared), 0, &r);
    EXPECT_EQ(Fired(r.kernels(0), "excess_dram_traffic"), fired);
  }
}

TEST(KernelProfileRules, NameTheFigureTheyRestOn) {
  v1::ProfileReport r = OneKernel({{"dram__bytes_read.sum", 3e6},
                                   {"dram__bytes_write.sum", 1e6},
                                   {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 64000},
                                   {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 2000},
                                   {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 20},
                                   {"lts__throughput.avg.pct_of_peak_sustained_elapsed", 90}},
                                  Launch(1000, 256, 128));
  DeriveProfile(8'000'000, 4'000'000, &r);
  const v1::KernelProfile& k = r.kernels(0);
  EXPECT_TRUE(Fired(k, "below_definition_bytes"));   // 3 MB of the 8 the definition reads
  EXPECT_TRUE(Fired(k, "scattered_loads"));          // 32 sectors a request
  EXPECT_TRUE(Fired(k, "registers_cap_occupancy"));  // 128 registers: 25%
  EXPECT_TRUE(Fired(k, "l2_rereads"));               // L2 at 90% with DRAM at 20%
  for (const v1::ProfileAdvice& a : k.advice()) {
    EXPECT_FALSE(a.text().empty());
    EXPECT_FALSE(a.figure().empty()) << a.rule();
  }
  // The register advice names a count that lets a third block reside: 80 registers a
  // thread is 2,560 a warp, 24 warps' worth, three blocks of 8.
  for (const v1::ProfileAdvice& a : k.advice()) {
    if (a.rule() == "registers_cap_occupancy") {
      EXPECT_NE(a.text().find("at most 80 a thread"), std::string::npos) << a.text();
    }
  }
}

TEST(KernelProfileRules, AnUnavailableProfileIsLeftAsItIs) {
  v1::ProfileReport r;
  r.set_unavailable_reason("counters unavailable on this machine: no permission");
  DeriveProfile(1000, 500, &r);
  EXPECT_FALSE(r.available());
  EXPECT_EQ(r.kernels_size(), 0);
}

TEST(KernelProfileMetrics, NameEachStallReasonOnce) {
  std::set<std::string> seen;
  for (const std::string& m : ProfileMetrics()) EXPECT_TRUE(seen.insert(m).second) << m;
  EXPECT_TRUE(seen.count("smsp__warps_issue_stalled_long_scoreboard.sum") > 0);
  EXPECT_TRUE(seen.count("dram__bytes_read.sum") > 0);
}

}  // namespace
}  // namespace kerneleval::server
