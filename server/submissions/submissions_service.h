// The RPC edge of kerneleval.v1.Submissions: checks a submission, compiles it in a
// kerneleval-compile process, checks its resources against the device and registers it.
// Compiles run on a few worker threads of this service, never on gRPC's threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "kerneleval/v1/submissions.grpc.pb.h"
#include "server/identity/caller_identity.h"
#include "server/submissions/compile_queue.h"
#include "server/submissions/compiler.h"
#include "server/submissions/launch_plan.h"
#include "server/submissions/registry.h"

namespace kerneleval::server::submissions {

// The longest status message this service answers: gRPC clients drop metadata past 8 KiB by
// default (the status message travels as metadata), and the rest of the trailers need room.
inline constexpr std::size_t kMaxStatusMessageBytes = 4096;

struct SubmissionsOptions {
  bool enabled = false;  // --submissions; off: every call is FAILED_PRECONDITION
  std::string data_dir;  // --data-dir: where registered submissions are kept; empty: memory
  // Set (a fleet sharing --results-db): submissions are kept there instead, every server
  // resolving its callers' submissions from it.
  std::shared_ptr<SubmissionRecords> shared;
  CompilerOptions compiler;
  std::size_t max_source_bytes = 256 << 10;
  std::size_t max_per_owner = 64;
  std::size_t max_total = 1024;
  int compile_workers = 2;         // compiles at once (--compile-workers)
  std::size_t compile_queue = 16;  // waiting beyond that: RESOURCE_EXHAUSTED
  // Compiles one owner may have waiting or running (0: no limit), so that one owner cannot
  // take the whole compile queue.
  std::size_t max_compiles_per_owner = 4;
  // Who a call is (caller_identity.h; must outlive the service). Null: every caller is
  // "anonymous".
  const Identities* identities = nullptr;
  // Called after a submission is deleted, with its owner and id, so that the devices unload
  // it (server/device/tenant_backend.h). May be empty.
  std::function<void(const std::string& owner, const std::string& id)> on_deleted;
};

// The devices the server serves, asked at call time (a device may be replaced).
using DeviceLister = std::function<std::vector<v1::Device>()>;

// A registered submission ready for a device host: what the lead's evaluation path needs.
struct ResolvedSubmission {
  v1::Submission submission;  // spec (with source), diagnostics, id, owner
  std::string cubin;
};

// Every method is raw (server/grpc/raw_unary.h): a body that does not parse is INVALID_ARGUMENT
// naming the method. Every error's message is bounded (kMaxStatusMessageBytes) so that it
// reaches the caller; a compile log longer than that goes in the response body when the
// request asks for it (RegisterSubmissionRequest.compile_error_in_response).
class SubmissionsService final
    : public v1::Submissions::WithRawCallbackMethod_RegisterSubmission<
          v1::Submissions::WithRawCallbackMethod_ListSubmissions<
              v1::Submissions::WithRawCallbackMethod_GetSubmission<
                  v1::Submissions::WithRawCallbackMethod_DeleteSubmission<
                      v1::Submissions::CallbackService>>>> {
 public:
  static absl::StatusOr<std::unique_ptr<SubmissionsService>> Create(SubmissionsOptions options,
                                                                    DeviceLister devices);
  ~SubmissionsService() override;  // finishes queued compiles, joins the workers

  grpc::ServerUnaryReactor* RegisterSubmission(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListSubmissions(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetSubmission(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteSubmission(grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;

  // For Run and Benchmark: the caller's submission by id or name (NOT_FOUND otherwise;
  // FAILED_PRECONDITION when submissions are off).
  absl::StatusOr<ResolvedSubmission> Resolve(const std::string& owner,
                                             const std::string& id_or_name) const;

  // The compile-and-check path without RPC (tests and the service share it). A compile
  // error keeps the compiler's status: the tool's message, the diagnostics as the payload
  // kCompileDiagnosticsPayload (compiler.h).
  absl::StatusOr<v1::RegisterSubmissionResponse> Register(const std::string& owner,
                                                          const v1::SubmissionSpec& spec);

 private:
  SubmissionsService(SubmissionsOptions options, DeviceLister devices,
                     std::unique_ptr<Registry> registry);
  absl::Status Enabled() const;
  std::string OwnerOf(const grpc::CallbackServerContext& context) const;
  // The arch and limits a spec is compiled and checked for.
  absl::StatusOr<DeviceLimits> TargetFor(const v1::SubmissionSpec& spec) const;
  // Queues `job` for a compile worker, taken fairly between owners (compile_queue.h);
  // RESOURCE_EXHAUSTED when the queue is full or `owner` has max_compiles_per_owner compiles
  // already.
  absl::Status Enqueue(const std::string& owner, std::function<void()> job);
  void WorkerLoop();

  const SubmissionsOptions options_;
  const DeviceLister devices_;
  std::unique_ptr<Registry> registry_;
  Compiler compiler_;

  std::mutex mu_;
  std::condition_variable cv_;
  CompileQueue queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kerneleval::server::submissions
