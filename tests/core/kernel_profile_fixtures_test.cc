// The profile's figures and rules on counters recorded from a real device: each fixture in
// tests/core/fixtures holds what one profiled call counted on an H100 (the kernels' launches
// and counters, the device's limits) with its provenance (GPU, driver, the server's revision,
// the protocol), as scripts/profile_fixtures.py writes it from a `bench --profile` report.
// The expectations are the kernels' known designs, not the code's output: the built-in reads
// each input byte once, the planted lazy_half_rows half of them, the warp-per-row example
// reads its rows twice, the CuTe DSL example loads 2 bytes a thread.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "server/figures/kernel_profile.h"

namespace kerneleval::server {
namespace {

struct Fixture {
  v1::ProfileReport report;
  std::uint64_t declared_read = 0, declared_write = 0;
  std::string gpu;
};

Fixture Load(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(KERNELEVAL_PROFILE_FIXTURES_DIR) /
                                     ("profile_h10080gbhbm3_" + name + ".json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  Fixture f;
  f.declared_read = j["provenance"]["declared_read_bytes"];
  f.declared_write = j["provenance"]["declared_write_bytes"];
  f.gpu = j["provenance"]["gpu"];
  google::protobuf::util::JsonParseOptions options;
  const auto status =
      google::protobuf::util::JsonStringToMessage(j["report"].dump(), &f.report, options);
  EXPECT_TRUE(status.ok()) << path << ": " << status.ToString();
  DeriveProfile(f.declared_read, f.declared_write, &f.report);
  return f;
}

bool Fired(const v1::KernelProfile& k, const std::string& rule) {
  for (const v1::ProfileAdvice& a : k.advice()) {
    if (a.rule() == rule) return true;
  }
  return false;
}

TEST(ProfileFixtures, AreFromTheDeviceTheySayWithOneKernelEach) {
  for (const char* name :
       {"cuda_fused_b1", "cuda_fused_b79", "cuda_fused_b16254", "lazy_half_rows_b79",
        "lazy_half_rows_b16254", "warp_per_row_b1", "warp_per_row_b16254", "fused_rows_vec16_b1",
        "cute_add_rmsnorm_b16254", "tilelang_add_rmsnorm_b16254"}) {
    SCOPED_TRACE(name);
    const Fixture f = Load(name);
    EXPECT_EQ(f.gpu, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(f.report.device().sm_count(), 132u);
    ASSERT_EQ(f.report.kernels_size(), 1);
    for (const v1::ProfileAdvice& a : f.report.kernels(0).advice()) {
      EXPECT_FALSE(a.figure().empty()) << a.rule();
    }
  }
}

// Issue's check: the profiles of lazy_half_rows and of the built-in tell them apart by their
// memory figures, at a batch inside L2 and one far beyond it.
TEST(ProfileFixtures, TellTheLazyKernelFromTheBuiltInByTheBytesRead) {
  for (const char* batch : {"b79", "b16254"}) {
    SCOPED_TRACE(batch);
    const v1::KernelProfile built_in = Load(std::string("cuda_fused_") + batch).report.kernels(0);
    const v1::KernelProfile lazy = Load(std::string("lazy_half_rows_") + batch).report.kernels(0);
    EXPECT_GT(built_in.memory().dram_read_vs_declared(), 0.95);
    EXPECT_LT(built_in.memory().dram_read_vs_declared(), 1.1);
    EXPECT_LT(lazy.memory().dram_read_vs_declared(), 0.6);
    EXPECT_FALSE(Fired(built_in, "below_definition_bytes"));
    EXPECT_TRUE(Fired(lazy, "below_definition_bytes"));
  }
}

// At B = 79 the built-in's outputs were still in L2 when it ended (no DRAM writes counted):
// a rule on all traffic called it lazy; the rule on reads does not.
TEST(ProfileFixtures, WritesStillInL2AreNoFault) {
  const v1::KernelProfile k = Load("cuda_fused_b79").report.kernels(0);
  EXPECT_LT(k.memory().dram_vs_declared(), 0.9);
  EXPECT_FALSE(Fired(k, "below_definition_bytes"));
  EXPECT_TRUE(Fired(k, "grid_smaller_than_device"));  // 79 rows, 8 to a block
}

// At one row a launch reads its code and constants from DRAM after the flush as well as its
// 12 KB of data: 1.9x the definition's reads for the built-in, 6.6x for the warp-per-row
// example (more code), neither reading any byte twice. No re-read is called a re-read.
TEST(ProfileFixtures, ALaunchsOwnReadsAreNoReRead) {
  for (const char* name : {"cuda_fused_b1", "warp_per_row_b1", "fused_rows_vec16_b1"}) {
    SCOPED_TRACE(name);
    const Fixture f = Load(name);
    const v1::KernelProfile& k = f.report.kernels(0);
    EXPECT_EQ(f.declared_read, 12288u);  // a row of x and of the residual, and the weight
    EXPECT_GT(k.memory().dram_read_vs_declared(), 1.25);
    EXPECT_LT(k.memory().dram_read_bytes() - f.declared_read, 128e3);
    EXPECT_FALSE(Fired(k, "excess_dram_traffic"));
    EXPECT_FALSE(Fired(k, "below_definition_bytes"));
  }
}

TEST(ProfileFixtures, NameWhatEachDesignCosts) {
  const v1::KernelProfile built_in = Load("cuda_fused_b16254").report.kernels(0);
  EXPECT_TRUE(Fired(built_in, "at_memory_roof"));
  EXPECT_FALSE(Fired(built_in, "excess_dram_traffic"));
  EXPECT_EQ(built_in.occupancy().limited_by(0), "registers");
  EXPECT_DOUBLE_EQ(built_in.occupancy().theoretical_pct(), 62.5);  // 10 blocks of 128, 46 regs

  // The warp-per-row example reads each row twice, the second time mostly from DRAM.
  const v1::KernelProfile twice = Load("warp_per_row_b16254").report.kernels(0);
  EXPECT_GT(twice.memory().dram_read_vs_declared(), 1.25);
  EXPECT_TRUE(Fired(twice, "excess_dram_traffic"));

  // The CuTe DSL example: 2-byte loads (2 sectors a warp request), rows read twice.
  const v1::KernelProfile narrow = Load("cute_add_rmsnorm_b16254").report.kernels(0);
  EXPECT_NEAR(narrow.memory().load_sectors_per_request(), 2.0, 0.01);
  EXPECT_TRUE(Fired(narrow, "narrow_loads"));
  EXPECT_TRUE(Fired(narrow, "excess_dram_traffic"));

  // The TileLang example: 16-byte loads, each byte read once, at the roof.
  const v1::KernelProfile tilelang = Load("tilelang_add_rmsnorm_b16254").report.kernels(0);
  EXPECT_NEAR(tilelang.memory().load_sectors_per_request(), 16.0, 0.01);
  EXPECT_FALSE(Fired(tilelang, "excess_dram_traffic"));
  EXPECT_FALSE(Fired(tilelang, "narrow_loads"));
  EXPECT_TRUE(Fired(tilelang, "at_memory_roof"));
}

}  // namespace
}  // namespace kerneleval::server
