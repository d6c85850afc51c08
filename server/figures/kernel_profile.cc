#include "server/figures/kernel_profile.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/figures/source_lines.h"

#if __has_include(<cuda_occupancy.h>)
#include <cuda_occupancy.h>
#define KERNELEVAL_OCCUPANCY_CALCULATOR 1
#endif

namespace kerneleval::server {
namespace {

// Nsight Compute's names, so that each figure can be read beside its report.
constexpr char kDuration[] = "gpu__time_duration.sum";  // ns
constexpr char kSmClock[] = "sm__cycles_elapsed.avg.per_second";
constexpr char kSmPct[] = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr char kMemoryPct[] = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
constexpr char kDramPct[] = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr char kL2Pct[] = "lts__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr char kL1Pct[] = "l1tex__throughput.avg.pct_of_peak_sustained_active";
constexpr char kDramRead[] = "dram__bytes_read.sum";
constexpr char kDramWrite[] = "dram__bytes_write.sum";
constexpr char kL2ReadSectors[] = "lts__t_sectors_op_read.sum";
constexpr char kL2WriteSectors[] = "lts__t_sectors_op_write.sum";
constexpr char kL2HitRate[] = "lts__t_sector_hit_rate.pct";
constexpr char kLoadSectors[] = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
constexpr char kLoadRequests[] = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
constexpr char kStoreSectors[] = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
constexpr char kStoreRequests[] = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";
constexpr char kAchieved[] = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr char kIssueActive[] = "smsp__issue_active.sum";
constexpr char kStallPrefix[] = "smsp__warps_issue_stalled_";
constexpr char kStallSuffix[] = ".sum";
// Floating-point operations per thread instruction: an FMA counts two.
const std::pair<const char*, double> kFlopCounters[] = {
    {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 2},
    {"smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 2},
};
constexpr double kSectorBytes = 32;
// A warp's coalesced access moves at most 16 bytes a thread: 512 bytes, 16 sectors.
constexpr double kMaxCoalescedSectors = 16;
// What any launch reads from DRAM after an L2 flush besides its data: its code, constants and
// parameters. Constant in the batch: 5 to 69 KB a call for the seven kernels profiled on an
// H100 (docs/results/profile-h100.md), so at one row it is most of the reads. Reads above the
// definition's by less than this are no sign that data is read twice.
constexpr double kLaunchReadAllowanceBytes = 256 * 1024;

// A counter's value, or `fallback` where the chip did not count it.
double Counter(const v1::KernelProfile& k, const char* name, double fallback = 0) {
  auto it = k.counters().find(name);
  return it != k.counters().end() ? it->second : fallback;
}
bool Has(const v1::KernelProfile& k, const char* name) { return k.counters().count(name) > 0; }

std::uint64_t Product(const google::protobuf::RepeatedField<std::uint32_t>& dims) {
  std::uint64_t n = 1;
  for (std::uint32_t d : dims) n *= d;
  return dims.empty() ? 0 : n;
}

// What the CUDA occupancy calculator says of one launch.
struct Limits {
  int blocks = 0;  // resident per SM
  int by_registers = 0, by_shared = 0, by_warps = 0, by_blocks = 0;
  std::vector<std::string> limited_by;
};

#ifdef KERNELEVAL_OCCUPANCY_CALCULATOR
cudaOccDeviceProp OccupancyDevice(const v1::ProfileDevice& d) {
  cudaOccDeviceProp p;
  p.computeMajor = static_cast<int>(d.compute_major());
  p.computeMinor = static_cast<int>(d.compute_minor());
  p.maxThreadsPerBlock = static_cast<int>(d.max_threads_per_block());
  p.maxThreadsPerMultiprocessor = static_cast<int>(d.max_threads_per_sm());
  p.regsPerBlock = static_cast<int>(d.registers_per_block());
  p.regsPerMultiprocessor = static_cast<int>(d.registers_per_sm());
  p.warpSize = d.warp_size() > 0 ? static_cast<int>(d.warp_size()) : 32;
  p.sharedMemPerBlock = d.shared_bytes_per_block();
  p.sharedMemPerMultiprocessor = d.shared_bytes_per_sm();
  p.numSms = static_cast<int>(d.sm_count());
  p.sharedMemPerBlockOptin = d.shared_bytes_per_block_optin();
  p.reservedSharedMemPerBlock = d.reserved_shared_bytes_per_block();
  return p;
}
#endif

// The calculator's answer for `launch` with `registers` per thread; false where it has none
// (a launch it refuses, or a build without the toolkit's calculator).
bool Calculate(const v1::ProfileDevice& device, const v1::ProfiledLaunch& launch,
               std::uint32_t registers, Limits* out) {
#ifdef KERNELEVAL_OCCUPANCY_CALCULATOR
  const cudaOccDeviceProp prop = OccupancyDevice(device);
  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = prop.maxThreadsPerBlock;
  attr.numRegs = static_cast<int>(registers);
  attr.sharedSizeBytes = launch.static_shared_bytes();
  attr.maxDynamicSharedSizeBytes = launch.dynamic_shared_bytes();
  // A block that needs more than the default limit was launched with the limit raised.
  attr.shmemLimitConfig =
      launch.static_shared_bytes() + launch.dynamic_shared_bytes() > prop.sharedMemPerBlock
          ? FUNC_SHMEM_LIMIT_OPTIN
          : FUNC_SHMEM_LIMIT_DEFAULT;
  cudaOccDeviceState state;
  cudaOccResult r;
  const int block = static_cast<int>(Product(launch.block()));
  if (block <= 0 ||
      cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, block,
                                              launch.dynamic_shared_bytes()) != CUDA_OCC_SUCCESS) {
    return false;
  }
  out->blocks = r.activeBlocksPerMultiprocessor;
  out->by_registers = r.blockLimitRegs;
  out->by_shared = r.blockLimitSharedMem;
  out->by_warps = r.blockLimitWarps;
  out->by_blocks = r.blockLimitBlocks;
  const struct {
    unsigned bit;
    const char* name;
  } kLimits[] = {{OCC_LIMIT_REGISTERS, "registers"},
                 {OCC_LIMIT_SHARED_MEMORY, "shared memory"},
                 {OCC_LIMIT_WARPS, "warps"},
                 {OCC_LIMIT_BLOCKS, "blocks"},
                 {OCC_LIMIT_BARRIERS, "barriers"}};
  for (const auto& l : kLimits) {
    if ((r.limitingFactors & l.bit) != 0) out->limited_by.push_back(l.name);
  }
  return true;
#else
  return false;
#endif
}

void ThroughputFigures(v1::KernelProfile* k) {
  v1::ProfileThroughput* t = k->mutable_throughput();
  t->set_sm_pct(Counter(*k, kSmPct));
  t->set_memory_pct(Counter(*k, kMemoryPct));
  t->set_dram_pct(Counter(*k, kDramPct));
  t->set_l2_pct(Counter(*k, kL2Pct));
  t->set_l1_pct(Counter(*k, kL1Pct));
}

void MemoryFigures(v1::KernelProfile* k) {
  v1::ProfileMemory* m = k->mutable_memory();
  m->set_dram_read_bytes(Counter(*k, kDramRead));
  m->set_dram_write_bytes(Counter(*k, kDramWrite));
  m->set_l2_read_bytes(Counter(*k, kL2ReadSectors) * kSectorBytes);
  m->set_l2_write_bytes(Counter(*k, kL2WriteSectors) * kSectorBytes);
  m->set_l2_hit_rate_pct(Counter(*k, kL2HitRate));
  const double loads = Counter(*k, kLoadRequests);
  const double stores = Counter(*k, kStoreRequests);
  m->set_load_requests(loads);
  m->set_store_requests(stores);
  if (loads > 0) m->set_load_sectors_per_request(Counter(*k, kLoadSectors) / loads);
  if (stores > 0) m->set_store_sectors_per_request(Counter(*k, kStoreSectors) / stores);
}

void StallFigures(v1::KernelProfile* k) {
  const double issued = Counter(*k, kIssueActive);
  double total = 0;
  std::vector<std::pair<double, std::string>> cycles;
  for (const std::string& reason : StallReasons()) {
    const std::string name = absl::StrCat(kStallPrefix, reason, kStallSuffix);
    if (!Has(*k, name.c_str())) continue;
    const double c = Counter(*k, name.c_str());
    // "selected" is the cycle a warp issues, not a wait.
    if (reason == "selected" || c <= 0) continue;
    cycles.emplace_back(c, reason);
    total += c;
  }
  std::sort(cycles.begin(), cycles.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto& [c, reason] : cycles) {
    v1::WarpStall* s = k->add_stalls();
    s->set_reason(reason);
    if (issued > 0) s->set_cycles_per_instruction(c / issued);
    s->set_share_pct(100.0 * c / total);
  }
}

void RooflineFigures(const v1::ProfileDevice& device, v1::KernelProfile* k) {
  v1::RooflinePoint* r = k->mutable_roofline();
  double flops = 0;
  for (const auto& [name, ops] : kFlopCounters) flops += ops * Counter(*k, name);
  const double bytes = k->memory().dram_read_bytes() + k->memory().dram_write_bytes();
  r->set_flops(flops);
  r->set_dram_bytes(bytes);
  if (bytes > 0) r->set_arithmetic_intensity(flops / bytes);
  if (k->duration_seconds() > 0) r->set_flops_per_second(flops / k->duration_seconds());
  const double clock = k->sm_clock_hz() > 0 ? k->sm_clock_hz() : device.sm_clock_khz_max() * 1e3;
  r->set_peak_flops_per_second(2.0 * device.fp32_lanes_per_sm() * device.sm_count() * clock);
  r->set_peak_dram_bytes_per_second(device.peak_dram_bytes_per_second());
  if (r->peak_dram_bytes_per_second() <= 0 || r->peak_flops_per_second() <= 0) return;
  r->set_ridge_point(r->peak_flops_per_second() / r->peak_dram_bytes_per_second());
  r->set_attainable_flops_per_second(std::min(
      r->peak_flops_per_second(), r->arithmetic_intensity() * r->peak_dram_bytes_per_second()));
  r->set_bound(r->arithmetic_intensity() < r->ridge_point() ? "memory" : "compute");
}

std::string Pct(double v) { return absl::StrFormat("%.0f%%", v); }

v1::ProfileAdvice Advice(const char* rule, std::string text, const char* figure, double value) {
  v1::ProfileAdvice a;
  a.set_rule(rule);
  a.set_text(std::move(text));
  a.set_figure(figure);
  a.set_value(value);
  return a;
}

// The most registers per thread that still lets one more block reside, or 0 if none does.
std::uint32_t RegistersForOneMoreBlock(const v1::ProfileDevice& device,
                                       const v1::ProfiledLaunch& launch, int blocks_now) {
  for (std::uint32_t regs = launch.registers_per_thread(); regs >= 16; regs -= 8) {
    Limits r;
    if (Calculate(device, launch, regs, &r) && r.by_registers > blocks_now) return regs;
    if (regs < 24) break;
  }
  return 0;
}

}  // namespace

const std::vector<std::string>& ProfileMetrics() {
  static const std::vector<std::string>* metrics = [] {
    auto* m = new std::vector<std::string>{
        kDuration,    kSmClock,      kSmPct,        kMemoryPct,     kDramPct,        kL2Pct,
        kL1Pct,       kDramRead,     kDramWrite,    kL2ReadSectors, kL2WriteSectors, kL2HitRate,
        kLoadSectors, kLoadRequests, kStoreSectors, kStoreRequests, kAchieved,       kIssueActive};
    for (const auto& [name, ops] : kFlopCounters) m->push_back(name);
    for (const std::string& r : StallReasons()) {
      m->push_back(absl::StrCat(kStallPrefix, r, kStallSuffix));
    }
    return m;
  }();
  return *metrics;
}

const std::vector<std::string>& StallReasons() {
  static const std::vector<std::string>* reasons =
      new std::vector<std::string>{"long_scoreboard",
                                   "short_scoreboard",
                                   "wait",
                                   "barrier",
                                   "membar",
                                   "mio_throttle",
                                   "lg_throttle",
                                   "math_pipe_throttle",
                                   "not_selected",
                                   "selected",
                                   "no_instruction",
                                   "drain",
                                   "dispatch_stall",
                                   "sleeping",
                                   "branch_resolving",
                                   "imc_miss",
                                   "tex_throttle",
                                   "misc"};
  return *reasons;
}

v1::ProfileOccupancy TheoreticalOccupancy(const v1::ProfileDevice& device,
                                          const v1::ProfiledLaunch& launch) {
  v1::ProfileOccupancy o;
  Limits r;
  if (!Calculate(device, launch, launch.registers_per_thread(), &r)) return o;
  const std::uint64_t threads = Product(launch.block());
  const std::uint64_t warp = device.warp_size() > 0 ? device.warp_size() : 32;
  const std::uint64_t warps_per_block = (threads + warp - 1) / warp;
  const std::uint64_t max_warps = device.max_threads_per_sm() / warp;
  auto count = [](int v) { return static_cast<std::uint32_t>(std::max(v, 0)); };
  o.set_blocks_per_sm(count(r.blocks));
  o.set_blocks_by_registers(count(r.by_registers));
  o.set_blocks_by_shared_memory(count(r.by_shared));
  o.set_blocks_by_warps(count(r.by_warps));
  o.set_blocks_by_block_limit(count(r.by_blocks));
  if (max_warps > 0) {
    o.set_theoretical_pct(100.0 * r.blocks * static_cast<double>(warps_per_block) /
                          static_cast<double>(max_warps));
  }
  for (const std::string& l : r.limited_by) o.add_limited_by(l);
  const std::uint64_t resident = static_cast<std::uint64_t>(count(r.blocks)) * device.sm_count();
  const std::uint64_t grid = Product(launch.grid());
  if (resident > 0) o.set_waves(static_cast<double>(grid) / static_cast<double>(resident));
  if (grid > 0 && grid < resident) o.add_limited_by("grid");
  return o;
}

void DeriveProfile(std::uint64_t declared_read_bytes, std::uint64_t declared_write_bytes,
                   v1::ProfileReport* report) {
  if (!report->available()) return;
  double call_dram = 0, call_dram_read = 0;
  for (v1::KernelProfile& k : *report->mutable_kernels()) {
    k.set_duration_seconds(Counter(k, kDuration) * 1e-9);
    k.set_sm_clock_hz(Counter(k, kSmClock));
    ThroughputFigures(&k);
    MemoryFigures(&k);
    *k.mutable_occupancy() = TheoreticalOccupancy(report->device(), k.launch());
    k.mutable_occupancy()->set_achieved_pct(Counter(k, kAchieved));
    k.clear_stalls();
    StallFigures(&k);
    RooflineFigures(report->device(), &k);
    call_dram += k.memory().dram_read_bytes() + k.memory().dram_write_bytes();
    call_dram_read += k.memory().dram_read_bytes();
  }
  const std::uint64_t declared = declared_read_bytes + declared_write_bytes;
  for (v1::KernelProfile& k : *report->mutable_kernels()) {
    v1::ProfileMemory& m = *k.mutable_memory();
    m.set_declared_bytes(declared);
    m.set_declared_read_bytes(declared_read_bytes);
    if (declared > 0) m.set_dram_vs_declared(call_dram / static_cast<double>(declared));
    if (declared_read_bytes > 0) {
      m.set_dram_read_vs_declared(call_dram_read / static_cast<double>(declared_read_bytes));
    }
    k.clear_advice();
    for (v1::ProfileAdvice& a : AdviseKernel(report->device(), k, report->kernels_size())) {
      *k.add_advice() = std::move(a);
    }
  }
}

std::vector<v1::ProfileAdvice> AdviseKernel(const v1::ProfileDevice& device,
                                            const v1::KernelProfile& k, std::size_t call_kernels) {
  std::vector<v1::ProfileAdvice> out;
  const v1::ProfileMemory& m = k.memory();
  const v1::ProfileOccupancy& o = k.occupancy();
  const v1::ProfileThroughput& t = k.throughput();

  // The call's DRAM reads against the definition's (one kernel's rule for the call). Reads,
  // not writes: after the flush every input byte must come from DRAM, but written lines may
  // still sit in L2 when the call ends (on an H100, 0 of 0.32 MB written back at B = 79 and
  // 32 of 51 MB at B = 12383, by the service's counters and by Nsight Compute's alike).
  if (k.index() == 0 && m.declared_read_bytes() > 0 && m.dram_read_vs_declared() > 0) {
    const double ratio = m.dram_read_vs_declared();
    if (ratio < 0.9) {
      out.push_back(
          Advice("below_definition_bytes",
                 absl::StrFormat("the call read %.2fx the %.1f MB the definition must read from "
                                 "DRAM: part of the input was never read, or it was still in L2 "
                                 "from before",
                                 ratio, m.declared_read_bytes() / 1e6),
                 "memory.dram_read_vs_declared", ratio));
    } else if (const double excess = m.dram_read_bytes() - m.declared_read_bytes();
               ratio > 1.25 && excess > kLaunchReadAllowanceBytes) {
      out.push_back(
          Advice("excess_dram_traffic",
                 absl::StrFormat("the call read %.2fx the definition's %.1f MB from DRAM, %.1f MB "
                                 "more (L2 hit rate %s): something is read more than once; fuse "
                                 "the passes, or keep the row in registers or shared memory "
                                 "between them",
                                 ratio, m.declared_read_bytes() / 1e6, excess / 1e6,
                                 Pct(m.l2_hit_rate_pct())),
                 "memory.dram_read_vs_declared", ratio));
    }
  }
  if (m.load_sectors_per_request() > kMaxCoalescedSectors) {
    out.push_back(Advice(
        "scattered_loads",
        absl::StrFormat("global loads touch %.1f sectors per request, more than the %.0f a "
                        "coalesced warp needs at 16 bytes a thread: neighbouring threads should "
                        "read neighbouring, aligned addresses",
                        m.load_sectors_per_request(), kMaxCoalescedSectors),
        "memory.load_sectors_per_request", m.load_sectors_per_request()));
  } else if (m.load_requests() > 0 && m.load_sectors_per_request() < 8 && t.dram_pct() < 80) {
    out.push_back(Advice(
        "narrow_loads",
        absl::StrFormat("global loads move %.0f bytes per warp request (%.1f sectors): 16-byte "
                        "vector loads (uint4, float4) would need %.1fx fewer requests",
                        m.load_sectors_per_request() * kSectorBytes, m.load_sectors_per_request(),
                        kMaxCoalescedSectors / std::max(m.load_sectors_per_request(), 1.0)),
        "memory.load_sectors_per_request", m.load_sectors_per_request()));
  }
  if (m.store_sectors_per_request() > kMaxCoalescedSectors) {
    out.push_back(Advice(
        "scattered_stores",
        absl::StrFormat("global stores touch %.1f sectors per request, more than the %.0f of a "
                        "coalesced warp",
                        m.store_sectors_per_request(), kMaxCoalescedSectors),
        "memory.store_sectors_per_request", m.store_sectors_per_request()));
  }
  const bool by = [&] {
    for (const std::string& l : o.limited_by()) {
      if (l == "registers") return true;
    }
    return false;
  }();
  if (o.theoretical_pct() > 0 && o.theoretical_pct() < 50 && by) {
    const std::uint32_t regs =
        RegistersForOneMoreBlock(device, k.launch(), static_cast<int>(o.blocks_per_sm()));
    out.push_back(Advice(
        "registers_cap_occupancy",
        regs > 0 ? absl::StrFormat("registers (%u a thread) cap occupancy at %s; at most %u a "
                                   "thread (__launch_bounds__ or -maxrregcount) lets one more "
                                   "block of %u threads reside",
                                   k.launch().registers_per_thread(), Pct(o.theoretical_pct()),
                                   regs, static_cast<unsigned>(Product(k.launch().block())))
                 : absl::StrFormat("registers (%u a thread) cap occupancy at %s",
                                   k.launch().registers_per_thread(), Pct(o.theoretical_pct())),
        "occupancy.theoretical_pct", o.theoretical_pct()));
  }
  for (const std::string& l : o.limited_by()) {
    if (l == "shared memory" && o.theoretical_pct() < 50) {
      out.push_back(
          Advice("shared_memory_caps_occupancy",
                 absl::StrFormat("shared memory (%llu bytes a block) caps occupancy at %s",
                                 static_cast<unsigned long long>(k.launch().static_shared_bytes() +
                                                                 k.launch().dynamic_shared_bytes()),
                                 Pct(o.theoretical_pct())),
                 "occupancy.theoretical_pct", o.theoretical_pct()));
    }
  }
  const std::uint64_t grid = Product(k.launch().grid());
  if (grid > 0 && grid < device.sm_count()) {
    out.push_back(Advice("grid_smaller_than_device",
                         absl::StrFormat("the grid has %llu blocks for %u SMs: %llu SMs idle; "
                                         "split the work into more blocks",
                                         static_cast<unsigned long long>(grid), device.sm_count(),
                                         static_cast<unsigned long long>(device.sm_count() - grid)),
                         "occupancy.waves", o.waves()));
  } else if (o.waves() > 1 && o.waves() < 2 && o.waves() - std::floor(o.waves()) < 0.5) {
    out.push_back(Advice(
        "partial_last_wave",
        absl::StrFormat("%.2f waves of blocks: the last wave keeps only %.0f%% of the SMs busy; "
                        "a grid of whole waves, or a persistent grid, evens the tail",
                        o.waves(), 100 * (o.waves() - std::floor(o.waves()))),
        "occupancy.waves", o.waves()));
  }
  if (o.theoretical_pct() > 0 && o.achieved_pct() > 0 &&
      o.achieved_pct() < 0.7 * o.theoretical_pct()) {
    out.push_back(Advice(
        "achieved_below_theoretical",
        absl::StrFormat("achieved occupancy %s against %s possible: blocks finish unevenly or "
                        "the grid does not fill the device",
                        Pct(o.achieved_pct()), Pct(o.theoretical_pct())),
        "occupancy.achieved_pct", o.achieved_pct()));
  }
  if (!k.stalls().empty()) {
    const v1::WarpStall& top = k.stalls(0);
    if (top.reason() == "long_scoreboard" && top.share_pct() > 30) {
      out.push_back(Advice(
          "waits_on_global_loads",
          absl::StrFormat("warps wait on global memory (long_scoreboard: %.1f cycles per "
                          "issued instruction, %s of stalls): issue the row's loads before "
                          "using any of them (unroll, 16-byte loads), or keep more warps resident",
                          top.cycles_per_instruction(), Pct(top.share_pct())),
          "stalls.long_scoreboard", top.share_pct()));
    } else if (top.reason() == "barrier" && top.share_pct() > 30) {
      out.push_back(Advice(
          "waits_at_barriers",
          absl::StrFormat("warps wait at __syncthreads (barrier: %s of stalls): a block-wide "
                          "reduction may be cheaper as warp shuffles, or with fewer barriers",
                          Pct(top.share_pct())),
          "stalls.barrier", top.share_pct()));
    }
  }
  if (t.dram_pct() >= 80) {
    out.push_back(Advice("at_memory_roof",
                         absl::StrFormat("DRAM at %s of its peak: the kernel is at the memory "
                                         "roof; only fewer bytes make it faster",
                                         Pct(t.dram_pct())),
                         "throughput.dram_pct", t.dram_pct()));
  } else if (t.l2_pct() >= 80 && t.dram_pct() < 60) {
    out.push_back(Advice("l2_rereads",
                         absl::StrFormat("L2 at %s of its peak while DRAM is at %s: data is "
                                         "re-read from L2; keep it in registers or shared memory",
                                         Pct(t.l2_pct()), Pct(t.dram_pct())),
                         "throughput.l2_pct", t.l2_pct()));
  } else if (t.sm_pct() < 60 && t.memory_pct() < 60) {
    out.push_back(Advice(
        "latency_bound",
        absl::StrFormat("neither the SMs (%s) nor memory (%s) is near its peak: the kernel waits "
                        "on latency%s; more bytes in flight per thread or more resident warps",
                        Pct(t.sm_pct()), Pct(t.memory_pct()),
                        call_kernels > 1 ? " or on the kernels before it" : ""),
        "throughput.memory_pct", t.memory_pct()));
  }
  for (v1::ProfileAdvice& a : AdviseLines(k.source_lines())) out.push_back(std::move(a));
  return out;
}

}  // namespace kerneleval::server
