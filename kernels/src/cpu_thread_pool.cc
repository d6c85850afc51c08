#include "kerneleval/kernels/cpu_thread_pool.h"

#include <sched.h>

#include <algorithm>

namespace kerneleval {

CpuThreadPool::CpuThreadPool(int threads) {
  const int workers = std::max(threads, 1) - 1;
  workers_.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

CpuThreadPool::~CpuThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int CpuThreadPool::AvailableThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return std::max(static_cast<int>(std::thread::hardware_concurrency()), 1);
}

void CpuThreadPool::RunTasks(std::uint32_t generation, const std::function<void(std::size_t)>& task,
                             std::size_t tasks) {
  std::uint64_t claim = claim_.load();
  for (;;) {
    const std::size_t index = claim & 0xffffffffu;
    if ((claim >> 32) != generation || index >= tasks) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1)) continue;
    task(index);
    if (finished_.fetch_add(1) + 1 == tasks) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
    claim = claim_.load();
  }
}

void CpuThreadPool::ParallelFor(std::size_t tasks, const std::function<void(std::size_t)>& task) {
  if (tasks == 0) return;
  if (tasks == 1 || workers_.empty()) {
    for (std::size_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  std::uint32_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = ++generation_;
    task_ = &task;
    tasks_ = tasks;
    finished_.store(0);
    claim_.store(static_cast<std::uint64_t>(generation) << 32);
  }
  wake_.notify_all();
  RunTasks(generation, task, tasks);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_.load() == tasks; });
  task_ = nullptr;
}

void CpuThreadPool::WorkerLoop() {
  std::uint32_t seen = 0;
  for (;;) {
    const std::function<void(std::size_t)>* task;
    std::size_t tasks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
      tasks = tasks_;
    }
    // task_ is null when the call has already ended: then there is nothing to claim.
    if (task != nullptr) RunTasks(seen, *task, tasks);
  }
}

}  // namespace kerneleval
