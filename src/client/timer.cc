#include "client/timer.h"

namespace penstock {

using Clock = std::chrono::steady_clock;

Timer::Timer() : thread_([this] { Run(); }) {}

Timer::~Timer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Timer::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    due_.emplace(Clock::now() + delay, std::move(fn));
  }
  cv_.notify_one();
}

void Timer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto first = due_.begin();
    if (first->first > Clock::now()) {
      cv_.wait_until(lock, first->first);
      continue;
    }
    auto fn = std::move(first->second);
    due_.erase(first);
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace penstock
