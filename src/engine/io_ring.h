// io_ring.h — io_uring for any number of threads, each blocking on its own I/O.
//
// A pool of small rings ("lanes"), up to `entries` of them, created on demand. A thread takes
// an idle lane, submits its one I/O and waits for the completion in the same io_uring_enter
// call (io_uring_submit_and_wait), then gives the lane back. So an I/O costs one system call
// and no hand-off between threads (v1 had one shared ring and a reaper thread waking the
// submitter, two context switches per I/O, which bounded small random I/O on few cores), and
// `entries` I/Os can be in flight at once; a thread that finds every lane busy waits for one.
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
#include <vector>

#include "penstock/status.h"

namespace penstock::engine {

class IoRing {
 public:
  static constexpr unsigned kMaxEntries = 1024;

  // `entries` (the most I/Os in flight) is clamped to [1, kMaxEntries]. Errors: from
  // io_uring_queue_init for the first lane (kernel without io_uring, RLIMIT_MEMLOCK too low).
  static Result<std::unique_ptr<IoRing>> Create(unsigned entries);
  ~IoRing();
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  // pread/pwrite through a lane; block until done. Return bytes transferred (may be short)
  // or -errno. `rw_flags` are RWF_* flags (RWF_DSYNC for a durable write).
  int64_t ReadAt(int fd, uint64_t offset, void* buf, size_t length);
  int64_t WriteAt(int fd, uint64_t offset, const void* buf, size_t length, int rw_flags);

 private:
  struct Lane {
    io_uring ring{};
  };

  explicit IoRing(unsigned max_lanes) : max_lanes_(max_lanes) {}
  // A lane for the caller's exclusive use: an idle one, a new one, or (all busy) the next
  // one released.
  Lane* Acquire();
  void Release(Lane* lane);
  static int NewLane(std::unique_ptr<Lane>& out);
  template <typename Prepare>
  int64_t Execute(Prepare prepare);

  const unsigned max_lanes_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // guarded by mu_; every lane ever created
  std::vector<Lane*> idle_;                   // guarded by mu_
};

}  // namespace penstock::engine
