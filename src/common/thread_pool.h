// thread_pool.h — a fixed set of worker threads running queued tasks in FIFO order.
// Used where a non-blocking caller (a transport thread) must hand blocking work (device
// I/O) to other threads. Submit() is thread-safe; the destructor runs the tasks already
// queued, then joins the workers. Threads carry names (NamedThread), so `top -H` and `perf
// report --sort comm` tell the engine's, the transport's and the pools' threads apart.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace penstock {

// A thread running `body` under the name `name` (the kernel keeps its first 15 characters),
// e.g. "ps-commit".
std::thread NamedThread(std::string name, std::function<void()> body);

class ThreadPool {
 public:
  // `name`: each worker thread's name (NamedThread).
  explicit ThreadPool(unsigned threads, std::string name = "ps-pool");
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  // Tasks queued and not yet started.
  size_t queued() const;

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace penstock
