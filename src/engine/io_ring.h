// io_ring.h — one io_uring shared by any number of threads, each blocking on its own I/O.
//
// Submission takes a mutex (the SQ ring has one producer at a time); a reaper thread owned by
// the IoRing drains the completion ring and wakes the submitting thread, so many threads'
// I/Os are in flight at once. A counting semaphore caps in-flight I/Os at the ring size, so
// the SQ never overflows. Later work (registered buffers, per-core rings, async callbacks)
// extends this class without changing its users.
//
// Thread safety: ReadAt/WriteAt may be called from any thread. Destroy the ring only when no
// call is in flight.
#pragma once

#include <liburing.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <semaphore>
#include <thread>

#include "penstock/status.h"

namespace penstock::engine {

class IoRing {
 public:
  static constexpr unsigned kMaxEntries = 1024;

  // `entries` is clamped to [1, kMaxEntries]. Errors: from io_uring_queue_init (kernel without
  // io_uring, RLIMIT_MEMLOCK too low).
  static Result<std::unique_ptr<IoRing>> Create(unsigned entries);
  ~IoRing();
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  // pread/pwrite through the ring; block until done. Return bytes transferred (may be short)
  // or -errno. `rw_flags` are RWF_* flags (RWF_DSYNC for a durable write).
  int64_t ReadAt(int fd, uint64_t offset, void* buf, size_t length);
  int64_t WriteAt(int fd, uint64_t offset, const void* buf, size_t length, int rw_flags);

 private:
  // One submitted I/O; lives on the submitter's stack. The reaper sets `result` and `done`
  // under `mu` and notifies while still holding it, so the submitter cannot return (and
  // destroy the Op) before the reaper is done touching it.
  struct Op {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int32_t result = 0;
  };

  explicit IoRing(unsigned entries) : slots_(entries) {}
  template <typename Prepare>
  int64_t Execute(Prepare prepare);
  void SubmitLocked();
  void ReapLoop();

  io_uring ring_{};
  std::mutex submit_mu_;  // guards the SQ ring
  std::counting_semaphore<kMaxEntries> slots_;
  std::thread reaper_;  // the only reader of the CQ ring
};

}  // namespace penstock::engine
