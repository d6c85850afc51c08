// An exclusive lock on a server's --data-dir, held for the life of the process: two servers on
// one directory would each run their own migrations, retention and submission files over the
// other's, and SQLite's own locking would only surface it as "database is locked" under load.
// flock(2) on DIR/.kerneleval.lock: released by the kernel when the process dies, however it
// dies, so a crash never leaves a stale lock. The descriptor is close-on-exec: device hosts
// and compile processes never hold it.
//
// Move-only; not thread-safe (one owner).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kerneleval::server {

class DataDirLock {
 public:
  // Creates `dir` when missing (mode 0700; the lock file 0600, common/private_files.h) and
  // locks it. FAILED_PRECONDITION naming the directory (and the holder's pid) when another
  // process holds it; UNAVAILABLE when it cannot be created or opened.
  static absl::StatusOr<DataDirLock> Acquire(const std::string& dir);

  DataDirLock(DataDirLock&& other) noexcept;
  DataDirLock& operator=(DataDirLock&& other) noexcept;
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;
  ~DataDirLock();

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kerneleval::server
