#include "server/device/bounded_reap.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <thread>

namespace kerneleval::server {

std::optional<int> KillAndReap(pid_t pid, std::chrono::milliseconds limit) {
  kill(pid, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return std::nullopt;  // not our child (already reaped)
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::thread([pid] {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }).detach();
  return std::nullopt;
}

}  // namespace kerneleval::server
