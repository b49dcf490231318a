#include "engine/io_ring.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "common/log.h"

namespace penstock::engine {

Result<std::unique_ptr<IoRing>> IoRing::Create(unsigned entries) {
  entries = std::clamp(entries, 1u, kMaxEntries);
  std::unique_ptr<IoRing> ring(new IoRing(entries));
  int rc = io_uring_queue_init(entries, &ring->ring_, 0);
  if (rc < 0) {
    return ErrnoStatus(-rc, "io_uring_queue_init(" + std::to_string(entries) +
                                " entries) failed; the kernel needs io_uring enabled "
                                "(sysctl kernel.io_uring_disabled=0) and enough RLIMIT_MEMLOCK");
  }
  ring->reaper_ = std::thread([r = ring.get()] { r->ReapLoop(); });
  return ring;
}

IoRing::~IoRing() {
  if (reaper_.joinable()) {
    // A NOP with null user data tells the reaper to stop.
    slots_.acquire();
    {
      std::lock_guard lock(submit_mu_);
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data(sqe, nullptr);
      SubmitLocked();
    }
    reaper_.join();
  }
  io_uring_queue_exit(&ring_);
}

void IoRing::SubmitLocked() {
  for (;;) {
    int rc = io_uring_submit(&ring_);
    if (rc >= 0) return;
    if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) {
      sched_yield();  // the reaper drains completions; try again
      continue;
    }
    // The SQE stays queued and references a caller's stack: there is no safe way back.
    PS_LOG_ERROR("io_uring_submit failed: {}; aborting", std::string(strerror(-rc)));
    std::abort();
  }
}

template <typename Prepare>
int64_t IoRing::Execute(Prepare prepare) {
  Op op;
  slots_.acquire();
  {
    std::lock_guard lock(submit_mu_);
    // Never null: at most `entries` I/Os hold a slot and the SQ ring has `entries` entries.
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    prepare(sqe);
    io_uring_sqe_set_data(sqe, &op);
    SubmitLocked();
  }
  int32_t result;
  {
    std::unique_lock lock(op.mu);
    op.cv.wait(lock, [&] { return op.done; });
    result = op.result;
  }
  slots_.release();
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

void IoRing::ReapLoop() {
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR || rc == -EAGAIN) continue;
    if (rc < 0) {
      PS_LOG_ERROR("io_uring_wait_cqe failed: {}; aborting", std::string(strerror(-rc)));
      std::abort();
    }
    bool stop = false;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      auto* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
      if (op == nullptr) {
        stop = true;
        continue;
      }
      std::lock_guard lock(op->mu);
      op->result = cqe->res;
      op->done = true;
      op->cv.notify_one();
    }
    io_uring_cq_advance(&ring_, seen);
    if (stop) {
      slots_.release();
      return;
    }
  }
}

}  // namespace penstock::engine
