// What the exploit tests of the compile path share: a real server on loopback compiling in
// real kerneleval-compile processes, on this kernel as it is (with Landlock) or as a kernel
// without Landlock (the tool started under kerneleval-compile-without-landlock, whose
// landlock_* syscalls answer ENOSYS); a submission around a prelude; the whole answer as
// text; a planted file holding a marker no source mentions.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/submit_client.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {

// The kernel the compile tool runs on, as far as it can tell.
enum class Kernel { kAsItIs, kWithoutLandlock };

inline std::string KernelName(const ::testing::TestParamInfo<Kernel>& info) {
  return info.param == Kernel::kAsItIs ? "WithLandlock" : "WithoutLandlock";
}

inline server::ServerOptions RedTeamOptions(Kernel kernel) {
  server::ServerOptions o = SubmissionOptions();
  if (kernel == Kernel::kWithoutLandlock) {
    o.submissions.compiler.tool_path = KERNELEVAL_TEST_COMPILE_TOOL_WITHOUT_LANDLOCK;
  }
  return o;
}

inline SubmissionsServer StartRedTeamServer(Kernel kernel) {
  return StartSubmissionsServer(RedTeamOptions(kernel));
}

inline constexpr char kTinyKernel[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = VALUE;\n"
    "}\n";

// A one-kernel submission: `prelude`, then kTinyKernel writing `value`.
inline v1::SubmissionSpec Spec(const std::string& name, const std::string& prelude,
                               const std::string& value = "p.eps") {
  std::string kernel = kTinyKernel;
  kernel.replace(kernel.find("VALUE"), 5, value);
  return OneKernelSpec(name, prelude + kernel, "tiny", v1::DTYPE_FP32, 32);
}

// The status and the whole response as text: everything a caller gets back.
struct Answer {
  grpc::Status status;
  v1::RegisterSubmissionResponse response;
  std::string Text() const {
    return status.error_message() + "\n" + status.error_details() + "\n" + response.DebugString();
  }
};

inline Answer Register(const SubmissionsServer& f, const v1::SubmissionSpec& spec) {
  Answer a;
  a.status = f.submissions->Register(spec, &a.response);
  return a;
}

// A random marker no source mentions.
inline std::string NewMarker() {
  std::random_device rd;
  return "PLANTED_SECRET_" + std::to_string(rd()) + std::to_string(rd());
}

// A file only the server's machine has, holding a marker.
struct PlantedFile {
  std::filesystem::path dir, path;
  std::string marker = NewMarker();
  PlantedFile() {
    dir = std::filesystem::temp_directory_path() /
          ("redteam-" + std::to_string(getpid()) + "-" + marker.substr(15, 6));
    std::filesystem::create_directories(dir);
    path = dir / "secret.h";
    // Lines that are errors wherever they land, so that a compiler that reads the file
    // quotes them in its log.
    std::ofstream(path) << marker << " = 1;\n"
                        << "int " << marker << "_two = " << marker << "_undefined;\n";
  }
  PlantedFile(const PlantedFile&) = delete;
  PlantedFile& operator=(const PlantedFile&) = delete;
  ~PlantedFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace kerneleval::testing
