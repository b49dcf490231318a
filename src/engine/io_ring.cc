#include "engine/io_ring.h"

#include <algorithm>
#include <cerrno>
#include <string>

namespace penstock::engine {

namespace {

constexpr unsigned kLaneEntries = 2;  // one I/O at a time per lane

}  // namespace

int IoRing::NewLane(std::unique_ptr<Lane>& out) {
  auto lane = std::make_unique<Lane>();
  int rc = io_uring_queue_init(kLaneEntries, &lane->ring, 0);
  if (rc < 0) return rc;
  out = std::move(lane);
  return 0;
}

Result<std::unique_ptr<IoRing>> IoRing::Create(unsigned entries) {
  entries = std::clamp(entries, 1u, kMaxEntries);
  std::unique_ptr<IoRing> ring(new IoRing(entries));
  std::unique_ptr<Lane> first;
  int rc = NewLane(first);
  if (rc < 0) {
    return ErrnoStatus(-rc, "io_uring_queue_init failed; the kernel needs io_uring enabled "
                            "(sysctl kernel.io_uring_disabled=0) and enough RLIMIT_MEMLOCK");
  }
  ring->idle_.push_back(first.get());
  ring->lanes_.push_back(std::move(first));
  return ring;
}

IoRing::~IoRing() {
  for (auto& lane : lanes_) io_uring_queue_exit(&lane->ring);
}

IoRing::Lane* IoRing::Acquire() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!idle_.empty()) {
      Lane* lane = idle_.back();
      idle_.pop_back();
      return lane;
    }
    if (lanes_.size() < max_lanes_) {
      std::unique_ptr<Lane> lane;
      if (NewLane(lane) == 0) {  // on failure (memlock, fds) make do with the lanes we have
        lanes_.push_back(std::move(lane));
        return lanes_.back().get();
      }
    }
    idle_cv_.wait(lock, [&] { return !idle_.empty(); });
  }
}

void IoRing::Release(Lane* lane) {
  {
    std::lock_guard lock(mu_);
    idle_.push_back(lane);
  }
  idle_cv_.notify_one();
}

template <typename Prepare>
int64_t IoRing::Execute(Prepare prepare) {
  Lane* lane = Acquire();
  io_uring_sqe* sqe = io_uring_get_sqe(&lane->ring);  // never null: the lane is empty
  prepare(sqe);
  int rc = io_uring_submit_and_wait(&lane->ring, 1);
  io_uring_cqe* cqe = nullptr;
  if (rc >= 0 || rc == -EINTR) {
    // Submitted (or interrupted while waiting): collect the completion.
    do {
      rc = io_uring_wait_cqe(&lane->ring, &cqe);
    } while (rc == -EINTR || rc == -EAGAIN);
  }
  int64_t result = rc;
  if (rc == 0 && cqe != nullptr) {
    result = cqe->res;
    io_uring_cqe_seen(&lane->ring, cqe);
  }
  Release(lane);
  return result;
}

int64_t IoRing::ReadAt(int fd, uint64_t offset, void* buf, size_t length) {
  return Execute([&](io_uring_sqe* sqe) {
    io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(length), offset);
  });
}

int64_t IoRing::WriteAt(int fd, uint64_t offset, const void* buf, size_t length, int rw_flags) {
  return Execute([&](io_uring_sqe* sqe) {
    io_uring_prep_write(sqe, fd, buf, static_cast<unsigned>(length), offset);
    sqe->rw_flags = rw_flags;
  });
}

}  // namespace penstock::engine
