// repair_jobs.h — the workers that rebuild stripes during one repair pass, and the pass's
// limit on repair traffic (RepairOptions::rate_bytes_per_s).
//
// A pass hands each stripe it must rebuild to Submit and waits for them with Wait before it
// moves on to the next container (jobs refer to that container's listing). Submit blocks
// while twice as many jobs as workers are queued or running, so a pass never queues a whole
// container. Owned by the pass (RunPass): destroying it runs the jobs already queued, then
// joins the workers. Submit, Pace and Wait are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "common/thread_pool.h"

namespace penstock {

class RepairJobs {
 public:
  // `workers` jobs run at once; `rate_bytes_per_s` (0: unlimited) paces what they write,
  // counted from `started`.
  RepairJobs(unsigned workers, uint64_t rate_bytes_per_s, std::chrono::steady_clock::time_point started);
  RepairJobs(const RepairJobs&) = delete;
  RepairJobs& operator=(const RepairJobs&) = delete;

  // Queues `job` (blocks while the queue is full).
  void Submit(std::function<void()> job);
  // Counts `bytes` written, then sleeps until the rate allows everything counted so far.
  void Pace(uint64_t bytes);
  // Returns once every job submitted so far has finished.
  void Wait();

 private:
  const unsigned workers_;
  const uint64_t rate_bytes_per_s_;
  const std::chrono::steady_clock::time_point started_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t repaired_bytes_ = 0;  // guarded by mu_
  int jobs_ = 0;                 // guarded by mu_: queued or running
  ThreadPool pool_;              // last: destroyed (joined) first
};

}  // namespace penstock
