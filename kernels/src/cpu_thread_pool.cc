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

void CpuThreadPool::RunTasks() {
  for (std::size_t i = next_.fetch_add(1); i < tasks_; i = next_.fetch_add(1)) (*task_)(i);
}

void CpuThreadPool::ParallelFor(std::size_t tasks, const std::function<void(std::size_t)>& task) {
  if (tasks == 0) return;
  if (tasks == 1 || workers_.empty()) {
    for (std::size_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &task;
    tasks_ = tasks;
    next_.store(0);
    busy_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  RunTasks();
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return busy_workers_ == 0; });
  task_ = nullptr;
}

void CpuThreadPool::WorkerLoop() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    RunTasks();
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_workers_ == 0) done_.notify_one();
  }
}

}  // namespace kerneleval
