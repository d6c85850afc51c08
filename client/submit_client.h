// A small synchronous client for kerneleval.v1.Submissions, on the same channel rules as
// KernelEvalClient (deadline per call, bearer token as `authorization` metadata), and the
// request the `submit` command builds from its flags. Thread-safety: all methods may be
// called concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "client/kerneleval_client.h"
#include "kerneleval/v1/submissions.grpc.pb.h"

namespace kerneleval::client {

class SubmissionsClient {
 public:
  // Uses `channel` (see MakeChannel); the deadline and token of `options` apply to each call.
  SubmissionsClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  // With `compile_error_in_response`, a source that does not compile answers OK with
  // response->compile_error() set and the NVRTC log (up to 64 KiB) in it; without, the error is the
  // status, whose message carries only the head of the log.
  grpc::Status Register(const v1::SubmissionSpec& spec, v1::RegisterSubmissionResponse* response,
                        bool compile_error_in_response = false) const;
  // Every page of the caller's submissions, joined into one response.
  grpc::Status List(v1::ListSubmissionsResponse* response) const;
  grpc::Status Get(const std::string& id_or_name, v1::GetSubmissionResponse* response) const;
  grpc::Status Delete(const std::string& id_or_name, v1::DeleteSubmissionResponse* response) const;

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  ClientOptions options_;
  std::unique_ptr<v1::Submissions::Stub> stub_;
};

// What `kerneleval submit` describes: one kernel, or several in order.
struct SubmitSpec {
  std::string source_path;
  std::string name;
  std::string description;
  std::vector<std::string> entries;          // one per kernel, in launch order
  std::vector<uint32_t> block_sizes;         // one, or one per kernel
  std::vector<uint32_t> rows_per_block;      // one per kernel, or empty with ctas_per_sm
  std::vector<uint32_t> ctas_per_sm;         // one per kernel (persistent), or empty
  std::vector<uint32_t> dynamic_smem_bytes;  // none, one, or one per kernel
  uint32_t cluster_x = 0;
  bool pdl = false;
  bool needs_scratch = false;
  bool ptx = false;  // the source is PTX (default: by the file's extension .ptx)
  std::string dtype = "bf16";
  std::string mode = "output";
  std::string target_arch;
  std::string device;
  bool fast_math = false;
  std::vector<std::string> defines;  // NAME or NAME=VALUE
  // The kernels' own parameter lists, in order: [K:]NAME=VALUE (client/param_args.h).
  std::vector<std::string> args;
};

// Reads the source and builds the request's spec. INVALID_ARGUMENT naming the flag for
// counts that do not match the entries, a bad define or dtype; NOT_FOUND for an unreadable
// source.
absl::StatusOr<v1::SubmissionSpec> BuildSubmissionSpec(const SubmitSpec& flags);

// Human-readable compile report: id, per-kernel registers / spills / shared memory, the log.
std::string FormatSubmission(const v1::Submission& submission, bool with_log);
std::string FormatSubmissionList(const v1::ListSubmissionsResponse& response);

}  // namespace kerneleval::client
