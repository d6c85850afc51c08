#include "server/app/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/private_files.h"

namespace kerneleval::server {

absl::StatusOr<DataDirLock> DataDirLock::Acquire(const std::string& dir) {
  if (absl::Status made = CreatePrivateDirectories(dir); !made.ok()) {
    return absl::UnavailableError(absl::StrCat("--data-dir: ", made.message()));
  }
  const std::string path = (std::filesystem::path(dir) / ".kerneleval.lock").string();
  const absl::StatusOr<int> fd = OpenPrivateFile(path, O_RDWR);
  if (!fd.ok()) return absl::UnavailableError(absl::StrCat("--data-dir: ", fd.status().message()));
  DataDirLock lock(*fd);
  if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("--data-dir: cannot lock '", path, "': ", std::strerror(error)));
    }
    // The holder wrote its pid there when it took the lock.
    char buf[32] = {};
    const ssize_t n = pread(*fd, buf, sizeof(buf) - 1, 0);
    const std::string pid(absl::StripAsciiWhitespace(std::string(buf, n > 0 ? n : 0)));
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir: '", dir, "' is in use: another kerneleval-server",
        pid.empty() ? "" : absl::StrCat(" (pid ", pid, ")"), " holds its lock ", path,
        "; give each server a directory of its own, or share results with --results-db"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(*fd, 0) == 0) (void)!pwrite(*fd, pid.data(), pid.size(), 0);
  return lock;
}

DataDirLock::DataDirLock(DataDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DataDirLock& DataDirLock::operator=(DataDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

}  // namespace kerneleval::server
