// Helpers shared by the robustness tests: random requests (checked against the fp64
// reference with CompareWithReference, request_helpers.h), temp directories and capturing
// what the process writes to stderr.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/conversions.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/kernels/half_types.h"
#include "kerneleval/v1/kerneleval.pb.h"
#include "request_helpers.h"

namespace kerneleval::testing {

inline v1::Tensor RandomTensor(v1::DType dtype, const std::vector<std::int64_t>& shape,
                               std::mt19937_64& rng) {
  const DType d = *DTypeFromProto(dtype, "dtype");
  std::size_t n = 1;
  for (auto s : shape) n *= static_cast<std::size_t>(s);
  std::string bytes(n * ElementSize(d), '\0');
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < n; ++i) StoreFromFloat(d, bytes.data(), i, normal(rng));
  v1::Tensor t;
  t.set_dtype(dtype);
  for (auto s : shape) t.add_shape(s);
  t.set_data(std::move(bytes));
  return t;
}

inline v1::RunRequest MakeRunRequest(v1::DType dtype, v1::Mode mode, std::int64_t batch,
                                     std::int64_t hidden, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  v1::RunRequest r;
  *r.mutable_hidden_states() = RandomTensor(dtype, {batch, hidden}, rng);
  *r.mutable_residual() = RandomTensor(dtype, {batch, hidden}, rng);
  *r.mutable_weight() = RandomTensor(dtype, {hidden}, rng);
  r.set_mode(mode);
  return r;
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base ? base : "/tmp") + "/kerneleval-robustness-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

// Sends everything written to file descriptor 2 (by any thread, gRPC's logger included)
// to a file until Stop(), which returns it.
class StderrCapture {
 public:
  explicit StderrCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = dup(2);
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved_ >= 0 && fd >= 0) dup2(fd, 2);
    if (fd >= 0) close(fd);
  }
  ~StderrCapture() { Stop(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  std::string Stop() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
    }
    return ReadWholeFile(path_);
  }

 private:
  std::string path_;
  int saved_ = -1;
};

}  // namespace kerneleval::testing
