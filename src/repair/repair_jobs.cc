#include "repair/repair_jobs.h"

#include <thread>

namespace penstock {

RepairJobs::RepairJobs(unsigned workers, uint64_t rate_bytes_per_s, std::chrono::steady_clock::time_point started)
    : workers_(workers), rate_bytes_per_s_(rate_bytes_per_s), started_(started), pool_(workers, "ps-repair") {}

void RepairJobs::Submit(std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return jobs_ < 2 * static_cast<int>(workers_); });  // bounded queue
  ++jobs_;
  lock.unlock();
  pool_.Submit([this, job = std::move(job)] {
    job();
    std::lock_guard<std::mutex> l(mu_);
    --jobs_;
    cv_.notify_all();
  });
}

void RepairJobs::Pace(uint64_t bytes) {
  std::chrono::steady_clock::time_point due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    repaired_bytes_ += bytes;
    if (rate_bytes_per_s_ == 0) return;
    due = started_ + std::chrono::microseconds(repaired_bytes_ * 1000000 / rate_bytes_per_s_);
  }
  std::this_thread::sleep_until(due);
}

void RepairJobs::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return jobs_ == 0; });
}

}  // namespace penstock
