// Files and directories that only the server's own user may read. What a server keeps under
// --data-dir is its callers' data: submitted sources and cubins, every owner's results, the
// compile logs. The process umask (022 in most service managers) would leave it readable to
// every local user, so each file is created with mode 0600 and each directory with 0700, and
// a file an older release made readable is narrowed when it is opened again.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval {

inline constexpr unsigned kPrivateFileMode = 0600;
inline constexpr unsigned kPrivateDirectoryMode = 0700;

// `dir` and its missing parents, each made with mode 0700 (the umask can only narrow it).
// Directories that exist keep their mode: one an operator made (a volume's mount point) is
// theirs to set. INTERNAL "cannot create 'DIR': REASON" on failure.
absl::Status CreatePrivateDirectories(const std::string& dir);

// open(2) of `path` with O_CREAT | O_CLOEXEC | `flags` and mode 0600, and the mode set to
// 0600 should the file exist with another. The descriptor, or INTERNAL "cannot open 'PATH':
// REASON".
absl::StatusOr<int> OpenPrivateFile(const std::string& path, int flags);

// `bytes` as the whole of `path`, mode 0600: written to PATH.tmp and renamed over `path`, so
// that a reader never sees half a file. INTERNAL "cannot write 'PATH': REASON" on failure.
absl::Status WritePrivateFile(const std::string& path, absl::string_view bytes);

// `path` created empty with mode 0600 if missing, else narrowed to 0600; for files another
// library opens by name (SQLite, whose -wal, -shm and -journal files take the mode of their
// database file).
absl::Status PreparePrivateFile(const std::string& path);

}  // namespace kerneleval
