// A kernel's parameters read from a real cubin (cubin_params.h): NVRTC compiles a kernel of
// seven parameters of known C++ types for sm_90a and sm_100a here, with no GPU, and the records
// must give each type's size and its offset in the parameter bank as the CUDA ABI lays them
// out (the oracle is the declaration, not the parser). Hostile bytes are refused, not read.
#include "server/submissions/cubin_params.h"

#include <nvrtc.h>

#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kerneleval::server::submissions {
namespace {

using ::testing::HasSubstr;

constexpr char kSource[] = R"(
struct Three { double a[3]; };
extern "C" __global__ void seven(const float* x, int n, float eps, Three t, char c,
                                 unsigned long long u, float* y) {
  if (n > 0) y[0] = x[0] + eps + static_cast<float>(t.a[0]) + c + static_cast<float>(u);
}
extern "C" __global__ void none() {}
)";

// The cubin NVRTC makes of kSource for `arch` ("sm_90a"); empty on failure (the test says so).
std::string CompileCubin(const char* arch) {
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, kSource, "params.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    return "";
  }
  const std::string flag = std::string("--gpu-architecture=") + arch;
  const char* options[] = {flag.c_str()};
  std::string cubin;
  std::size_t size = 0;
  if (nvrtcCompileProgram(program, 1, options) == NVRTC_SUCCESS &&
      nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS) {
    cubin.resize(size);
    if (nvrtcGetCUBIN(program, cubin.data()) != NVRTC_SUCCESS) cubin.clear();
  }
  nvrtcDestroyProgram(&program);
  return cubin;
}

TEST(CubinParams, SizesAndOffsetsAreTheDeclaredTypesOnEachArchitecture) {
  for (const char* arch : {"sm_90a", "sm_100a"}) {
    const std::string cubin = CompileCubin(arch);
    ASSERT_FALSE(cubin.empty()) << arch;
    const auto params = CubinKernelParams(cubin, "seven");
    ASSERT_TRUE(params.ok()) << arch << ": " << params.status();
    // const float*, int, float, Three (3 doubles), char, unsigned long long, float*: each at
    // the next multiple of its alignment.
    const std::vector<std::uint32_t> bytes = {8, 4, 4, 24, 1, 8, 8};
    const std::vector<std::uint32_t> offsets = {0, 8, 12, 16, 40, 48, 56};
    ASSERT_EQ(params->size(), bytes.size()) << arch;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      EXPECT_EQ((*params)[i].bytes, bytes[i]) << arch << " parameter " << i;
      EXPECT_EQ((*params)[i].offset, offsets[i]) << arch << " parameter " << i;
    }
    const auto none = CubinKernelParams(cubin, "none");
    if (none.ok()) EXPECT_TRUE(none->empty()) << arch;
  }
}

TEST(CubinParams, AnUnknownKernelIsNamed) {
  const std::string cubin = CompileCubin("sm_90a");
  ASSERT_FALSE(cubin.empty());
  const auto missing = CubinKernelParams(cubin, "eight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'eight'"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("submission.source"));
}

TEST(CubinParams, HostileRecordsAreRefusedNotRead) {
  const std::string cubin = CompileCubin("sm_90a");
  ASSERT_FALSE(cubin.empty());
  // The first parameter record's header: format EIFMT_SVAL, KPARAM_INFO, 12 bytes.
  const std::string header("\x04\x17\x0c\x00", 4);
  const std::size_t at = cubin.find(header);
  ASSERT_NE(at, std::string::npos);
  auto refused = [](const std::string& elf) {
    const auto r = CubinKernelParams(elf, "seven");
    return !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument;
  };
  std::string longer = cubin;
  longer[at + 2] = '\xff';  // a record that claims to run past its section
  longer[at + 3] = '\xff';
  EXPECT_TRUE(refused(longer));
  std::string other_size = cubin;
  other_size[at + 2] = '\x08';  // a parameter record of 8 bytes: not the format read here
  EXPECT_TRUE(refused(other_size));
  std::string twice = cubin;
  const std::size_t next = cubin.find(header, at + 4);
  ASSERT_NE(next, std::string::npos);
  std::memcpy(twice.data() + next + 8, cubin.data() + at + 8, 2);  // two records of one ordinal
  EXPECT_TRUE(refused(twice));
  for (std::size_t cut : {std::size_t{0}, std::size_t{63}, cubin.size() / 2}) {
    EXPECT_TRUE(refused(cubin.substr(0, cut))) << cut;
  }
}

}  // namespace
}  // namespace kerneleval::server::submissions
