// pacer.h — paces background work (GC relocation, scrub) to a byte rate.
//
// Account(bytes) returns the moment by which the work done so far would have taken at
// `bytes_per_sec`; the caller sleeps until then (interruptibly, see Engine::SleepUntil). Debt
// does not pile up across idle periods: an idle pacer starts again from "now".
// No I/O, no sleeping of its own. Not thread-safe: owned by one background thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace penstock::engine {

class Pacer {
 public:
  using Clock = std::chrono::steady_clock;
  // 0 = unlimited: Account always returns "now".
  explicit Pacer(uint64_t bytes_per_sec) : rate_(bytes_per_sec) {}

  Clock::time_point Account(uint64_t bytes, Clock::time_point now = Clock::now()) {
    if (rate_ == 0) return now;
    if (next_ < now) next_ = now;
    next_ += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(bytes) / static_cast<double>(rate_)));
    return next_;
  }

 private:
  const uint64_t rate_;
  Clock::time_point next_{};
};

}  // namespace penstock::engine
