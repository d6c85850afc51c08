#include "server/submissions/compiler.h"

#include <openssl/sha.h>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "kerneleval/submission_abi.h"
#include "server/submissions/bounded_log.h"
#include "server/submissions/compile_log.h"
#include "server/submissions/compile_tool_process.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

Compiler::Compiler(CompilerOptions options) : options_(std::move(options)) {}

std::string Compiler::CacheKey(const internal::CompileRequest& request) {
  // Length-prefixed fields, so that no two requests share an encoding.
  std::string canon;
  auto add = [&canon](absl::string_view field) {
    absl::StrAppend(&canon, field.size(), ":", field);
  };
  // The ABI header is part of every compile: a cubin built against another version of it
  // is never reused.
  add(absl::StrCat("abi", KERNELEVAL_ABI_VERSION));
  add(absl::StrCat(static_cast<int>(request.language())));
  add(request.arch());
  add(request.fast_math() ? "fast_math" : "");
  for (const auto& d : request.defines()) add(absl::StrCat(d.name(), "=", d.value()));
  add("entries");
  for (const auto& e : request.entries()) add(e);
  add(request.source());
  return Sha256Hex(canon);
}

absl::StatusOr<internal::CompileResponse> Compiler::Compile(
    const std::string& owner, const internal::CompileRequest& request) {
  // The owner is part of the key: a cache shared across owners told an owner, by
  // `cache_hit` and by a millisecond answer, that someone else had compiled the same source.
  // Length-prefixed, so that no owner's key is another's.
  const std::string key = Sha256Hex(absl::StrCat(owner.size(), ":", owner, CacheKey(request)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      internal::CompileResponse hit = it->second->second;
      hit.mutable_diagnostics()->set_cache_hit(true);
      return hit;
    }
  }
  absl::StatusOr<internal::CompileResponse> response = RunTool(request);
  if (!response.ok()) return response.status();
  v1::CompileDiagnostics* d = response->mutable_diagnostics();
  d->set_log(BoundedLog(SubmissionLogLines(d->log(), kSourceName)));
  if (response->code() == 0) {
    if (absl::Status s = CheckModuleLimits(response->cubin(), options_.module_limits); !s.ok()) {
      return s;
    }
  }
  if (response->code() != 0) {
    absl::Status failed(static_cast<absl::StatusCode>(response->code()), response->message());
    failed.SetPayload(kCompileDiagnosticsPayload,
                      absl::Cord(response->diagnostics().SerializeAsString()));
    return failed;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t bytes = response->ByteSizeLong();
  if (bytes <= options_.cache_bytes && index_.count(key) == 0) {
    lru_.emplace_front(key, *response);
    index_[key] = lru_.begin();
    cached_bytes_ += bytes;
    while (cached_bytes_ > options_.cache_bytes && !lru_.empty()) {
      cached_bytes_ -= lru_.back().second.ByteSizeLong();
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return response;
}

absl::StatusOr<internal::CompileResponse> Compiler::RunTool(
    const internal::CompileRequest& request) {
  return RunCompileTool(options_, request.SerializeAsString());
}

}  // namespace kerneleval::server::submissions
