// timer.h — runs callbacks after a delay, on one thread of its own.
//
// StripeIo's straggler timers, retry backoffs and lease retries run here. A callback runs on
// the timer's thread, so it must not block for long: every callback due after it waits.
// Callbacks still pending when the Timer is destroyed never run. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace penstock {

// Runs callbacks after a delay on one thread. Thread-safe.
class Timer {
 public:
  Timer();
  ~Timer();
  void After(std::chrono::milliseconds delay, std::function<void()> fn);

 private:
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> due_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace penstock
