// A small persistent pool of host threads that the CPU implementation spreads rows over.
// Its owner (a CPU device) creates it once; calls then only wake the threads, which sleep on
// a condition variable between calls (an idle pool costs no CPU time).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kerneleval {

class CpuThreadPool {
 public:
  // `threads` >= 1 counts the calling thread: threads - 1 workers are started.
  explicit CpuThreadPool(int threads);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  // Threads a ParallelFor runs on, the caller included.
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) once for every i in [0, tasks < 2^32), on the caller and the workers, and
  // returns when all have finished. Tasks are claimed one at a time, so a thread slowed by other
  // work on the machine takes fewer of them. Callers are serialized; `task` must not throw
  // and must not call ParallelFor on the same pool.
  void ParallelFor(std::size_t tasks, const std::function<void(std::size_t)>& task);

  // Hardware threads this process may run on (its CPU affinity mask), at least 1.
  static int AvailableThreads();

 private:
  void WorkerLoop();
  // Claims and runs tasks of call `generation` until none is left; a thread that wakes
  // after its call has ended claims nothing (the generation is part of the claim counter).
  void RunTasks(std::uint32_t generation, const std::function<void(std::size_t)>& task,
                std::size_t tasks);

  std::mutex call_mu_;  // one ParallelFor at a time
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // Guarded by mu_: the current call, read by workers when they wake.
  std::uint32_t generation_ = 0;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::size_t tasks_ = 0;
  bool stopping_ = false;
  // generation << 32 | next task index. The caller waits for `finished_` tasks, not for the
  // workers: a worker that another process keeps off its core does not hold the call up
  // unless it holds a task.
  std::atomic<std::uint64_t> claim_{0};
  std::atomic<std::size_t> finished_{0};
  std::vector<std::thread> workers_;
};

}  // namespace kerneleval
