// Ending a child process without ever blocking on it. A child stuck in the kernel (a device
// host inside the GPU driver, in uninterruptible sleep) does not die on SIGKILL until the
// driver lets it go, and a plain waitpid() for it would hold the caller (a device's worker,
// and with it the device's recovery) for as long.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

namespace kerneleval::server {

// Sends SIGKILL to `pid` (a child of this process) and reaps it, polling for at most
// `limit`. Returns its wait status, or nullopt when it has not ended by then: it is then
// reaped by a background thread whenever it does, so that it leaves no zombie and its pid is
// not reused meanwhile.
std::optional<int> KillAndReap(pid_t pid, std::chrono::milliseconds limit);

}  // namespace kerneleval::server
