#include "common/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace kerneleval {
namespace {

absl::Status Failed(absl::string_view what, const std::string& path, int error) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(error)));
}

}  // namespace

absl::Status CreatePrivateDirectories(const std::string& dir) {
  std::filesystem::path partial;
  for (const std::filesystem::path& part : std::filesystem::path(dir)) {
    partial /= part;
    if (mkdir(partial.c_str(), kPrivateDirectoryMode) == 0 || errno == EEXIST) continue;
    return Failed("cannot create", partial.string(), errno);
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return Failed("cannot create", dir, errno);
  if (!S_ISDIR(st.st_mode)) return Failed("cannot create", dir, ENOTDIR);
  return absl::OkStatus();
}

absl::StatusOr<int> OpenPrivateFile(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CREAT | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Failed("cannot open", path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 ||
      ((st.st_mode & 07777) != kPrivateFileMode && fchmod(fd, kPrivateFileMode) != 0)) {
    const int error = errno;
    close(fd);
    return Failed("cannot narrow the mode of", path, error);
  }
  return fd;
}

absl::Status WritePrivateFile(const std::string& path, absl::string_view bytes) {
  const std::string tmp = path + ".tmp";
  absl::StatusOr<int> fd = OpenPrivateFile(tmp, O_WRONLY | O_TRUNC);
  if (!fd.ok()) return fd.status();
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(*fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(*fd);
      std::remove(tmp.c_str());
      return Failed("cannot write", tmp, error);
    }
    done += static_cast<std::size_t>(n);
  }
  if (close(*fd) != 0) return Failed("cannot write", tmp, errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Failed("cannot write", path, errno);
  return absl::OkStatus();
}

absl::Status PreparePrivateFile(const std::string& path) {
  absl::StatusOr<int> fd = OpenPrivateFile(path, O_RDWR);
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

}  // namespace kerneleval
