#include "common/thread_pool.h"

#include <pthread.h>

namespace penstock {

std::thread NamedThread(std::string name, std::function<void()> body) {
  return std::thread([name = std::move(name), body = std::move(body)] {
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    body();
  });
}

ThreadPool::ThreadPool(unsigned threads, std::string name) {
  if (threads == 0) threads = 1;
  for (unsigned i = 0; i < threads; ++i) workers_.push_back(NamedThread(name, [this] { Run(); }));
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

size_t ThreadPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}

void ThreadPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace penstock
