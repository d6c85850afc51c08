#include "common/parallel_ranges.h"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace kerneleval {

void ParallelRanges(std::size_t n, std::size_t threads, std::size_t grain,
                    const std::function<void(std::size_t begin, std::size_t end)>& fn) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t units = (n + grain - 1) / grain;
  threads = std::clamp<std::size_t>(threads, 1, units);
  const std::size_t chunk = (units + threads - 1) / threads * grain;
  std::vector<std::thread> pool;
  std::size_t begin = 0;
  for (; begin + chunk < n; begin += chunk) {
    pool.emplace_back([&fn, begin, chunk] { fn(begin, begin + chunk); });
  }
  fn(begin, n);
  for (std::thread& t : pool) t.join();
}

std::size_t HostWorkThreads(std::size_t spare) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::size_t cores = std::thread::hardware_concurrency();
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    cores = static_cast<std::size_t>(CPU_COUNT(&set));
  }
  cores = std::max<std::size_t>(cores, 1);
  return std::clamp<std::size_t>(cores > spare ? cores - spare : 1, 1, 16);
}

}  // namespace kerneleval
