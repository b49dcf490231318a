// commit_gather.h — group commit's gathering: whether the committer, about to start a batch
// of few requests, waits a little for more.
//
// Each batch costs a device flush, a submission (a VM exit on a virtual disk), a journal record
// and a turn of every thread involved, whatever its size; a request waiting for the next batch
// costs latency. Under many writers spread over several targets requests trickle in, and a
// committer that starts as soon as one is there commits batches of a few (random 4 KiB writes
// over three targets: ~7 a batch, ~1300 flushes a second per target, CPU-bound). Waiting is
// worth it only while more requests are on their way, and never for a lone writer, so the
// committer waits (NextWait) only when
//   - fewer requests are queued than the recent batches held (EWMA of batch sizes; at least 2,
//     so a lone writer, or writers that all arrive together, never wait), and fewer than
//     `enough`;
//   - and requests arrive closer together than `max_wait` (EWMA of the gaps between arrivals);
// and then for the next arrival, at most twice that mean gap (each arrival starts that wait
// again), in all at most `max_wait`.
// A batch therefore grows only by requests already arriving, and the wait ends as soon as the
// gap says none is near. Not thread-safe: the committer calls it under its queue's mutex.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace penstock::engine {

class CommitGather {
 public:
  using Clock = std::chrono::steady_clock;
  // max_wait 0: never wait.
  CommitGather(std::chrono::microseconds max_wait, size_t enough) : max_wait_(max_wait), enough_(enough) {}

  // A request was queued at `now`.
  void Arrived(Clock::time_point now) {
    if (seen_any_) {
      // A gap after an idle spell says nothing about the load: count at most 4 x max_wait.
      const double gap = std::min<double>(std::chrono::duration<double, std::micro>(now - last_).count(),
                                          4.0 * static_cast<double>(max_wait_.count()));
      gap_us_ = have_gap_ ? gap_us_ + (gap - gap_us_) / 8 : gap;
      have_gap_ = true;
    }
    seen_any_ = true;
    last_ = now;
  }

  // A batch started with `size` requests.
  void Started(size_t size) { batch_ += (static_cast<double>(size) - batch_) / 8; }

  // How long to wait now for one more request before starting a batch with `queued` requests,
  // having waited `waited` for this batch already; zero: start it now.
  std::chrono::microseconds NextWait(size_t queued, std::chrono::microseconds waited) const {
    if (max_wait_.count() == 0 || waited >= max_wait_ || !have_gap_) return std::chrono::microseconds(0);
    const double expected = std::min(batch_, static_cast<double>(enough_));
    if (expected < 2.0 || static_cast<double>(queued) >= expected) return std::chrono::microseconds(0);
    // Arrivals sparser than the longest wait: the next is unlikely to come in time.
    if (gap_us_ > static_cast<double>(max_wait_.count())) return std::chrono::microseconds(0);
    const auto gap = std::chrono::microseconds(static_cast<int64_t>(2 * gap_us_) + 1);
    return std::min(gap, max_wait_ - waited);
  }

  double mean_batch() const { return batch_; }
  double mean_gap_us() const { return gap_us_; }

 private:
  const std::chrono::microseconds max_wait_;
  const size_t enough_;
  double batch_ = 1.0;    // EWMA of batch sizes
  double gap_us_ = 0;     // EWMA of gaps between arrivals (valid once have_gap_)
  bool have_gap_ = false;
  bool seen_any_ = false;
  Clock::time_point last_{};
};

}  // namespace penstock::engine
