// Device buffers kept for the life of a backend, by role and size, so that a workload runs on
// the same buffers every time it is measured.
//
// Why: where a workload's tensors land in device memory moves its time. On an H200, Liger's
// hidden-1024 fp32 workload (four 8 MB tensors) measured within 0.01-0.75% over five runs
// on the same buffers, and 1.5-2.7% apart over five runs that each allocated them anew
// (docs/results/measurement-h200.md). A suite's workloads run small to large, so without
// keeping them every run of a suite re-allocated every workload's buffers, and back-to-back
// runs differed by that much. With them kept, a run measures what the previous one measured.
// Another server process gets other buffers, so its numbers may differ by what placement is
// worth; the README says so. A kept buffer holds what its last call left: callers overwrite
// or clear what untrusted code could read.
//
// `Buffer` is DeviceBuffer in the service (any type with a static Allocate(bytes) returning
// absl::StatusOr<Buffer>, bytes(), and move semantics where a moved-from buffer is empty).
// Not thread-safe: one per backend, used by its worker.
#pragma once

#include <cstddef>
#include <list>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerneleval::server {

template <typename Buffer>
class KeptBuffers {
 public:
  // A buffer may be up to this much larger than a call needs and still serve it. No more:
  // a small call in the first bytes of a large buffer lands on other pages than the same
  // call in a buffer of its own size, and would time differently after a large workload
  // than after a small one. One 2 MiB page.
  static constexpr std::size_t kSlack = std::size_t{2} << 20;

  // Buffers not in use are kept up to the budget in all (none until it is set); past it
  // the least recently used are freed.
  KeptBuffers() = default;
  explicit KeptBuffers(std::size_t budget_bytes) : budget_bytes_(budget_bytes) {}
  void set_budget_bytes(std::size_t bytes) { budget_bytes_ = bytes; }

  // Leaves in `*slot` a buffer for `role` of at least `bytes` and at most `bytes + kSlack`:
  // the one already there if it fits; else the smallest kept buffer of that role that fits
  // (the one this role had at this size before), the slot's old buffer kept in its place;
  // else a new one. Where the allocation fails, every kept buffer is freed and it is tried
  // once more. `bytes` 0 leaves the slot as it is.
  absl::Status Fit(int role, std::size_t bytes, Buffer* slot) {
    if (bytes == 0 || Fits(slot->bytes(), bytes)) return absl::OkStatus();
    Keep(role, std::move(*slot));
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->role == role && Fits(it->buffer.bytes(), bytes) &&
          (best == kept_.end() || it->buffer.bytes() < best->buffer.bytes())) {
        best = it;
      }
    }
    if (best != kept_.end()) {
      kept_bytes_ -= best->buffer.bytes();
      *slot = std::move(best->buffer);
      kept_.erase(best);
      return absl::OkStatus();
    }
    absl::StatusOr<Buffer> fresh = Buffer::Allocate(bytes);
    if (!fresh.ok() && !kept_.empty()) {
      Clear();
      fresh = Buffer::Allocate(bytes);
    }
    if (!fresh.ok()) return fresh.status();
    *slot = *std::move(fresh);
    return absl::OkStatus();
  }

  // Frees every kept buffer (those in slots stay): after a device reset, or to make room.
  void Clear() {
    kept_.clear();
    kept_bytes_ = 0;
  }

  std::size_t kept_bytes() const { return kept_bytes_; }
  std::size_t kept_count() const { return kept_.size(); }

 private:
  struct Kept {
    int role;
    Buffer buffer;
  };

  static bool Fits(std::size_t have, std::size_t want) {
    return have >= want && have - want <= kSlack;
  }

  // Newest first; the oldest beyond the budget are freed.
  void Keep(int role, Buffer buffer) {
    if (buffer.bytes() == 0) return;
    kept_bytes_ += buffer.bytes();
    kept_.push_front({role, std::move(buffer)});
    while (kept_bytes_ > budget_bytes_ && !kept_.empty()) {
      kept_bytes_ -= kept_.back().buffer.bytes();
      kept_.pop_back();
    }
  }

  std::size_t budget_bytes_ = 0;
  std::list<Kept> kept_;
  std::size_t kept_bytes_ = 0;
};

}  // namespace kerneleval::server
