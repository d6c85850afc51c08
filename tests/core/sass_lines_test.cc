// PCs of a real module image mapped to their source lines (server/cuda/sass_lines.h): a
// kernel compiled here by NVRTC with -lineinfo, as the service compiles submissions, read by
// CUPTI on the host with no GPU.
#include "server/cuda/sass_lines.h"

#include <gtest/gtest.h>
#include <nvrtc.h>

#include <set>
#include <string>

namespace kerneleval::server {
namespace {

// Line 5 loads, line 6 stores: each must own some of the kernel's instructions.
constexpr char kSource[] =
    "extern \"C\" __global__ void scale(float* x, int n, float a) {\n"  // 1
    "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"          // 2
    "  if (i >= n) return;\n"                                           // 3
    "  float v;\n"                                                      // 4
    "  v = x[i];\n"                                                     // 5
    "  x[i] = v * a + 1.0f;\n"                                          // 6
    "}\n";

std::string Cubin(bool lineinfo) {
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, kSource, "submission.cu", 0, nullptr, nullptr) !=
      NVRTC_SUCCESS) {
    return "";
  }
  const char* with_lines[] = {"-arch=sm_90a", "-lineinfo"};
  const char* without[] = {"-arch=sm_90a"};
  std::string cubin;
  std::size_t size = 0;
  const nvrtcResult compiled = lineinfo ? nvrtcCompileProgram(program, 2, with_lines)
                                        : nvrtcCompileProgram(program, 1, without);
  if (compiled == NVRTC_SUCCESS && nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS) {
    cubin.resize(size);
    if (nvrtcGetCUBIN(program, cubin.data()) != NVRTC_SUCCESS) cubin.clear();
  }
  nvrtcDestroyProgram(&program);
  return cubin;
}

TEST(SassLines, EveryPcOfTheKernelMapsToItsSource) {
  const std::string cubin = Cubin(true);
  ASSERT_FALSE(cubin.empty());
  SassLines lines(cubin);
  std::set<std::uint32_t> seen;
  for (std::uint64_t pc = 0; pc < 0x200; pc += 16) {  // sm_90 instructions are 16 bytes
    const SourceLocation where = lines.Of("scale", pc);
    if (where.file.empty()) continue;
    EXPECT_EQ(where.file, "submission.cu");
    EXPECT_GE(where.line, 1u);
    EXPECT_LE(where.line, 7u);
    seen.insert(where.line);
  }
  EXPECT_TRUE(seen.count(5)) << "the load's line";
  EXPECT_TRUE(seen.count(6)) << "the store's line";
  // The same question twice: the same answer (from the cache).
  EXPECT_EQ(lines.Of("scale", 0x50).line, lines.Of("scale", 0x50).line);
  EXPECT_NE(lines.Crc(), 0u);
  EXPECT_EQ(lines.Crc(), SassLines(cubin).Crc());
}

TEST(SassLines, NoTableOrNoFunctionMeansNoLine) {
  SassLines lines(Cubin(true));
  EXPECT_TRUE(lines.Of("not_a_kernel", 0x10).file.empty());
  SassLines bare(Cubin(false));
  for (std::uint64_t pc = 0; pc < 0x100; pc += 16) {
    EXPECT_TRUE(bare.Of("scale", pc).file.empty()) << pc;
  }
  SassLines garbage("not a cubin");
  EXPECT_TRUE(garbage.Of("scale", 0).file.empty());
}

}  // namespace
}  // namespace kerneleval::server
