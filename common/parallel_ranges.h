// Splitting host work over threads: the fp64 reference and the random inputs of a workload
// are tens of millions of independent elements (33 M at the h2048 suite's largest batch,
// about a second each on one core), and a submission's verification rounds need both again
// for every round.
#pragma once

#include <cstddef>
#include <functional>

namespace kerneleval {

// Calls fn(begin, end) for contiguous ranges covering [0, n), at most `threads` of them, each
// on its own thread (the last on the caller's), and returns when all have returned. Ranges
// hold whole multiples of `grain` except the last (rows of a tensor: grain = hidden).
void ParallelRanges(std::size_t n, std::size_t threads, std::size_t grain,
                    const std::function<void(std::size_t begin, std::size_t end)>& fn);

// Host threads for such work: every core the process may use, at most 16; `spare` fewer when
// something else must keep running meanwhile (a worker thread driving a device, a device host
// process), at least 1.
std::size_t HostWorkThreads(std::size_t spare = 0);

}  // namespace kerneleval
