#include "engine/io_ring.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>

#include "common/buffer_pool.h"
#include "common/log.h"
#include "common/thread_pool.h"

namespace penstock::engine {

namespace {

std::atomic<uint64_t> g_fixed_ios{0};

// Registers the buffer pool's arena (BufferPool::ReserveArena) with `ring` as fixed buffer 0;
// false when there is none or the kernel refuses (RLIMIT_MEMLOCK: then said once).
bool RegisterArena(io_uring* ring) {
  std::span<std::byte> arena = BufferPool::Global().arena();
  if (arena.empty()) return false;
  iovec iov{arena.data(), arena.size()};
  const int rc = io_uring_register_buffers(ring, &iov, 1);
  if (rc < 0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      PS_LOG_WARN("io_uring: cannot register the {}-byte buffer arena ({}); I/O goes without "
                  "registered buffers (raise RLIMIT_MEMLOCK, or run with CAP_IPC_LOCK)",
                  arena.size(), std::strerror(-rc));
    }
    return false;
  }
  return true;
}

// A read or write of [buf, buf + length): from the registered arena (fixed buffer 0: no page
// pinning per I/O) when the ring has it and the buffer lies in it, else a plain one.
void PrepRead(io_uring_sqe* sqe, bool fixed, int fd, void* buf, size_t length, uint64_t offset) {
  if (fixed && BufferPool::Global().InArena(buf, length)) {
    io_uring_prep_read_fixed(sqe, fd, buf, static_cast<unsigned>(length), offset, 0);
    g_fixed_ios.fetch_add(1, std::memory_order_relaxed);
  } else {
    io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(length), offset);
  }
}

void PrepWrite(io_uring_sqe* sqe, bool fixed, int fd, const void* buf, size_t length, uint64_t offset) {
  if (fixed && BufferPool::Global().InArena(buf, length)) {
    io_uring_prep_write_fixed(sqe, fd, buf, static_cast<unsigned>(length), offset, 0);
    g_fixed_ios.fetch_add(1, std::memory_order_relaxed);
  } else {
    io_uring_prep_write(sqe, fd, buf, static_cast<unsigned>(length), offset);
  }
}

// user_data of asynchronous ring entries that carry no callback: the destructor's stop
// request, and entries whose submission failed (turned into no-ops, ignored when reaped).
int stop_tag_storage;
void* const kStopTag = &stop_tag_storage;

}  // namespace

Result<std::unique_ptr<IoRing>> IoRing::Create(unsigned entries) {
  entries = std::clamp(entries, 1u, kMaxEntries);
  std::unique_ptr<IoRing> ring(new IoRing(entries));
  int rc = 0;
  IoRing::Lane* first = ring->lanes_.Acquire(rc);  // fail here rather than on the first I/O
  if (first == nullptr) {
    return ErrnoStatus(-rc, "io_uring_queue_init failed; the kernel needs io_uring enabled "
                            "(sysctl kernel.io_uring_disabled=0) and enough RLIMIT_MEMLOCK");
  }
  ring->lanes_.Release(first);
  return ring;
}

IoRing::~IoRing() {
  if (reaper_.joinable()) {
    std::unique_lock lock(async_mu_);
    async_idle_cv_.wait(lock, [&] { return async_in_flight_ == 0; });
    // Every read is reaped: a no-op tagged kStopTag tells the completion thread to return.
    io_uring_sqe* sqe = io_uring_get_sqe(&async_lane_->ring);
    if (sqe == nullptr) {  // prepared entries of failed submissions fill the ring: send them
      io_uring_submit(&async_lane_->ring);
      sqe = io_uring_get_sqe(&async_lane_->ring);
    }
    if (sqe != nullptr) {
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data(sqe, kStopTag);
    }
    if (sqe == nullptr || io_uring_submit(&async_lane_->ring) < 0) {
      reaper_.detach();  // cannot happen short of a broken ring; never block the destructor
      async_lane_.release();  // the thread may still wait on it
    } else {
      lock.unlock();
      reaper_.join();
    }
  }
  if (async_lane_) io_uring_queue_exit(&async_lane_->ring);
}

IoRing::LanePool::~LanePool() {
  for (auto& lane : lanes_) io_uring_queue_exit(&lane->ring);
}

IoRing::Lane* IoRing::LanePool::Acquire(int& error) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!idle_.empty()) {
      Lane* lane = idle_.back();
      idle_.pop_back();
      return lane;
    }
    if (lanes_.size() < max_) {
      auto lane = std::make_unique<Lane>();
      int rc = io_uring_queue_init(entries_, &lane->ring, 0);
      if (rc == 0) {
        lane->fixed = RegisterArena(&lane->ring);
        lanes_.push_back(std::move(lane));
        return lanes_.back().get();
      }
      if (lanes_.empty()) {  // none to wait for
        error = rc;
        return nullptr;
      }
      // Out of memlock or fds: make do with the lanes there are.
    }
    idle_cv_.wait(lock, [&] { return !idle_.empty() || lanes_.size() < max_; });
  }
}

void IoRing::LanePool::Release(Lane* lane, bool broken) {
  {
    std::lock_guard lock(mu_);
    if (broken) {
      std::erase_if(lanes_, [&](const std::unique_ptr<Lane>& l) {
        if (l.get() != lane) return false;
        io_uring_queue_exit(&l->ring);
        return true;
      });
    } else {
      idle_.push_back(lane);
    }
  }
  idle_cv_.notify_one();
}

template <typename Prepare>
int64_t IoRing::Execute(Prepare prepare) {
  int error = 0;
  Lane* lane = lanes_.Acquire(error);
  if (lane == nullptr) return error;
  io_uring_sqe* sqe = io_uring_get_sqe(&lane->ring);  // never null: the lane is empty
  prepare(sqe, lane->fixed);
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
  lanes_.Release(lane);
  return result;
}

int64_t IoRing::ReadAt(int fd, uint64_t offset, void* buf, size_t length) {
  return Execute([&](io_uring_sqe* sqe, bool fixed) { PrepRead(sqe, fixed, fd, buf, length, offset); });
}

int64_t IoRing::WriteAt(int fd, uint64_t offset, const void* buf, size_t length, int rw_flags) {
  return Execute([&](io_uring_sqe* sqe, bool fixed) {
    PrepWrite(sqe, fixed, fd, buf, length, offset);
    sqe->rw_flags = rw_flags;
  });
}

namespace {

using BatchProgress = IoRing::BatchProgress;

// Prepares entries of 0..total-1 on `ring` while fewer than `window` are in flight.
template <typename Prepare>
void QueueBatch(io_uring* ring, size_t total, size_t window, Prepare prepare, BatchProgress& at) {
  while (at.queued < total && at.queued - at.completed < window) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) break;
    prepare(sqe, at.queued);
    sqe->user_data = at.queued;
    ++at.queued;
  }
}

// Runs entries 0..total-1 through `ring` (from where `at` says StartWriteAll left them), at
// most `window` in flight: `prepare(sqe, i)` fills
// entry i, `complete(i, res)` takes its result. Blocks until all are done, or until the ring
// fails: then it waits for what was submitted and returns the -errno, and entries that did not
// run are the caller's to mark; `unsent` tells whether prepared entries were left on the ring
// (which must then not be used again).
template <typename Prepare, typename Complete>
int RunBatch(io_uring* ring, size_t total, size_t window, Prepare prepare, Complete complete,
             bool& unsent, BatchProgress at = {}) {
  size_t& queued = at.queued;
  size_t& submitted = at.submitted;
  size_t& completed = at.completed;
  unsent = false;
  while (completed < total) {
    QueueBatch(ring, total, window, prepare, at);
    // Returns how many it submitted; -EINTR only when it submitted none (and was interrupted
    // waiting).
    int rc = io_uring_submit_and_wait(ring, 1);
    if (rc < 0 && rc != -EINTR) {
      // Let what was submitted finish: its buffers belong to the caller.
      while (completed < submitted) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_wait_cqe(ring, &cqe) != 0) break;
        complete(cqe->user_data, cqe->res);
        io_uring_cqe_seen(ring, cqe);
        ++completed;
      }
      unsent = queued > submitted;
      return rc;
    }
    if (rc > 0) submitted += static_cast<size_t>(rc);
    unsigned head = 0, seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(ring, head, cqe) {
      complete(cqe->user_data, cqe->res);
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    completed += seen;
  }
  return 0;
}

constexpr int64_t kNotRun = INT64_MIN;

}  // namespace

int IoRing::ReadAll(int fd, std::span<Read> reads) {
  int error = 0;
  Lane* lane = lanes_.Acquire(error);
  if (lane == nullptr) {
    for (Read& r : reads) r.result = error;
    return error;
  }
  for (Read& r : reads) r.result = kNotRun;
  bool unsent = false;
  const int failure = RunBatch(
      &lane->ring, reads.size(), kLaneEntries,
      [&](io_uring_sqe* sqe, size_t i) {
        PrepRead(sqe, lane->fixed, fd, reads[i].buf, reads[i].length, reads[i].offset);
      },
      [&](uint64_t i, int res) { reads[i].result = res; }, unsent);
  for (Read& r : reads) {
    if (r.result == kNotRun) r.result = failure;
  }
  lanes_.Release(lane, /*broken=*/unsent);  // entries that never went out: drop the lane
  return failure;
}

void IoRing::PrepareBatchWrite(const PendingWrites& p, io_uring_sqe* sqe, size_t i) {
  PrepWrite(sqe, p.lane->fixed, p.fd, p.writes[i].buf, p.writes[i].length, p.writes[i].offset);
}

std::unique_ptr<IoRing::PendingWrites> IoRing::StartWriteAll(int fd, std::span<Write> writes, bool datasync) {
  auto pending = StartEarlyWrites(fd, {});
  ContinueWriteAll(*pending, writes, datasync);
  return pending;
}

std::unique_ptr<IoRing::PendingWrites> IoRing::StartEarlyWrites(int fd, std::span<Write> writes) {
  auto pending = std::make_unique<PendingWrites>();
  pending->fd = fd;
  pending->lane = batch_lanes_.Acquire(pending->failure);
  ContinueWriteAll(*pending, writes, /*datasync=*/false);
  return pending;
}

void IoRing::ContinueWriteAll(PendingWrites& p, std::span<Write> writes, bool datasync) {
  for (size_t i = p.writes.size(); i < writes.size(); ++i) writes[i].result = kNotRun;
  p.writes = writes;
  p.datasync = datasync;
  if (p.lane == nullptr) return;
  // At most kBatchEntries in flight (the completion queue holds twice that). Submitted without
  // waiting; a failed submission is tried again, and reported, by FinishWriteAll.
  QueueBatch(&p.lane->ring, p.writes.size(), kBatchEntries,
             [&](io_uring_sqe* sqe, size_t i) { PrepareBatchWrite(p, sqe, i); }, p.progress);
  if (int rc = io_uring_submit(&p.lane->ring); rc > 0) p.progress.submitted += static_cast<size_t>(rc);
}

int IoRing::FinishWriteAll(std::unique_ptr<PendingWrites> pending) {
  PendingWrites& p = *pending;
  bool unsent = false;
  int failure = p.failure;
  if (p.lane != nullptr) {
    failure = RunBatch(
        &p.lane->ring, p.writes.size(), kBatchEntries,
        [&](io_uring_sqe* sqe, size_t i) { PrepareBatchWrite(p, sqe, i); },
        [&](uint64_t i, int res) { p.writes[i].result = res; }, unsent, p.progress);
    batch_lanes_.Release(p.lane, /*broken=*/failure != 0);
  }
  if (failure == 0) {
    // The flush runs here, on the thread that waited for the writes, rather than as one more
    // entry on the ring: io_uring cannot run an fsync without blocking, so it would go to an
    // io-wq worker, and its completion would wake this thread again: two hand-offs a batch
    // between threads, which on a small host cost more than the system call (random 4 KiB
    // writes +12% in a 3-target cluster, docs/performance.md).
    return p.datasync ? (::fdatasync(p.fd) == 0 ? 0 : -errno) : 0;
  }
  for (Write& w : p.writes) {
    if (w.result == kNotRun) w.result = failure;
  }
  return failure;
}

int IoRing::WriteAll(int fd, std::span<Write> writes, bool datasync) {
  return FinishWriteAll(StartWriteAll(fd, writes, datasync));
}

namespace {

thread_local IoRing::ThreadQueue* this_thread_queue = nullptr;

// Queues a read on `ring` whose completion carries `done` (taken; the reaper runs and deletes
// it) and submits it. False, with `done` left to the caller, when the ring is full or the
// kernel did not take it: the entry then stays queued and goes with the next submission, as a
// no-op whose completion (no callback) is ignored.
bool SubmitRead(io_uring* ring, bool fixed, int fd, uint64_t offset, void* buf, size_t length,
                IoRing::ReadDone& done) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe == nullptr) return false;
  PrepRead(sqe, fixed, fd, buf, length, offset);
  auto* callback = new IoRing::ReadDone(std::move(done));
  io_uring_sqe_set_data(sqe, callback);
  if (io_uring_submit(ring) < 0) {
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    done = std::move(*callback);
    delete callback;
    return false;
  }
  return true;
}

}  // namespace

void IoRing::UseOnThisThread(ThreadQueue* queue) { this_thread_queue = queue; }

uint64_t IoRing::registered_buffer_ios() { return g_fixed_ios.load(std::memory_order_relaxed); }

Result<std::unique_ptr<IoRing::ThreadQueue>> IoRing::ThreadQueue::Create(unsigned entries, uint64_t max_bytes) {
  std::unique_ptr<ThreadQueue> q(new ThreadQueue());
  q->entries_ = std::clamp(entries, 1u, kMaxEntries);
  q->max_bytes_ = max_bytes;
  // Twice the entries in the completion queue, as io_uring sizes it: never overflows.
  int rc = io_uring_queue_init(q->entries_, &q->ring_, 0);
  if (rc < 0) return ErrnoStatus(-rc, "io_uring_queue_init for a thread's read queue");
  q->ring_ready_ = true;
  q->fixed_ = RegisterArena(&q->ring_);
  q->event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (q->event_fd_ < 0) return ErrnoStatus(errno, "eventfd for a thread's read queue");
  rc = io_uring_register_eventfd(&q->ring_, q->event_fd_);
  if (rc < 0) return ErrnoStatus(-rc, "io_uring_register_eventfd");
  return q;
}

IoRing::ThreadQueue::~ThreadQueue() {
  while (ring_ready_ && in_flight_ > 0) {
    SubmitQueued();
    if (queued_ == in_flight_) {  // nothing submitted to wait for: the kernel had no room
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) < 0) continue;  // interrupted: wait again
    Reap();
  }
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) close(event_fd_);
}

void IoRing::ThreadQueue::SubmitQueued() {
  while (queued_ > 0) {
    int rc = submit_(&ring_);
    if (rc > 0) {
      queued_ -= std::min(queued_, static_cast<unsigned>(rc));
      continue;
    }
    if (rc == -EINTR) continue;
    if (rc == -EAGAIN || rc == -EBUSY) return;  // no resources now: the next Reap tries again
    // The kernel will not take them (or took none): fail their reads. Still on the ring,
    // unsubmitted, they become no-ops without callbacks, which the next submission sends.
    const int error = rc < 0 ? rc : -EIO;
    std::vector<Pending*> failed;
    for (unsigned i = 0; i < queued_; ++i) {
      io_uring_sqe* sqe = &ring_.sq.sqes[(ring_.sq.sqe_tail - queued_ + i) & ring_.sq.ring_mask];
      failed.push_back(reinterpret_cast<Pending*>(sqe->user_data));
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data(sqe, nullptr);
    }
    in_flight_ -= queued_;
    queued_ = 0;
    for (Pending* read : failed) {
      bytes_in_flight_ -= read->length;
      read->done(error);
      delete read;
    }
    return;
  }
}

size_t IoRing::ThreadQueue::Reap() {
  SubmitQueued();
  if (io_uring_cq_ready(&ring_) == 0) return 0;
  std::vector<std::pair<Pending*, int64_t>>& reaped = reaped_;  // kept: no allocation per reap
  reaped.clear();
  unsigned head = 0, seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    if (void* data = io_uring_cqe_get_data(cqe); data != nullptr) {
      reaped.emplace_back(static_cast<Pending*>(data), cqe->res);
    }  // (nullptr: a failed submission's entry)
  }
  io_uring_cq_advance(&ring_, seen);
  in_flight_ -= static_cast<unsigned>(reaped.size());
  // All of them out of the byte count first: a callback that queues a read (Submit) must not
  // be declined for reads already done.
  for (auto& [read, result] : reaped) bytes_in_flight_ -= read->length;
  for (auto& [read, result] : reaped) {  // a callback may queue again: the CQ is advanced
    read->done(result);
    delete read;
  }
  SubmitQueued();
  return reaped.size();  // (a callback does not reap, so `reaped` is not changed under the loop)
}

bool IoRing::ThreadQueue::Submit(int fd, uint64_t offset, void* buf, size_t length, ReadDone& done) {
  if (in_flight_ >= entries_) return false;
  if (in_flight_ > 0 && bytes_in_flight_ + length > max_bytes_) return false;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return false;
  PrepRead(sqe, fixed_, fd, buf, length, offset);
  io_uring_sqe_set_data(sqe, new Pending{std::move(done), length});
  ++in_flight_;
  ++queued_;
  bytes_in_flight_ += length;
  return true;
}

bool IoRing::ReadAsync(int fd, uint64_t offset, void* buf, size_t length, ReadDone& done) {
  if (this_thread_queue != nullptr) return this_thread_queue->Submit(fd, offset, buf, length, done);
  std::lock_guard lock(async_mu_);
  if (async_failed_ || async_in_flight_ >= kAsyncEntries) return false;
  if (!async_lane_) {
    auto lane = std::make_unique<Lane>();
    // Twice the entries, so a stop request always finds room.
    if (io_uring_queue_init(2 * kAsyncEntries, &lane->ring, 0) < 0) {
      async_failed_ = true;
      return false;
    }
    lane->fixed = RegisterArena(&lane->ring);
    async_lane_ = std::move(lane);
    reaper_ = NamedThread("ps-io-reap", [this] { ReapLoop(); });
  }
  if (!SubmitRead(&async_lane_->ring, async_lane_->fixed, fd, offset, buf, length, done)) return false;
  ++async_in_flight_;
  return true;
}

void IoRing::ReapLoop() {
  io_uring* ring = &async_lane_->ring;
  std::vector<std::pair<ReadDone*, int64_t>> reaped;
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(ring, &cqe) < 0) continue;  // interrupted (EINTR, EAGAIN): wait again
    // Everything completed by now, in one pass: one lock for the batch.
    bool stop = false;
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      void* data = io_uring_cqe_get_data(cqe);
      ++seen;
      if (data == kStopTag) stop = true;  // the destructor's, after every read was reaped
      else if (data != nullptr) reaped.emplace_back(static_cast<ReadDone*>(data), cqe->res);
      // (nullptr: a failed submission's entry)
    }
    io_uring_cq_advance(ring, seen);
    for (auto& [callback, result] : reaped) {
      (*callback)(result);
      delete callback;
    }
    if (!reaped.empty()) {
      std::lock_guard lock(async_mu_);
      async_in_flight_ -= static_cast<unsigned>(reaped.size());
      if (async_in_flight_ == 0) async_idle_cv_.notify_all();
    }
    reaped.clear();
    if (stop) return;
  }
}

}  // namespace penstock::engine
