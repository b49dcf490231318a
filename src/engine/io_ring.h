// io_ring.h — io_uring for any number of threads, each blocking on its own I/O.
//
// A pool of small rings ("lanes"), up to `entries` of them, created on demand. A thread takes
// an idle lane, submits its I/O and waits for the completion in the same io_uring_enter
// call (io_uring_submit_and_wait), then gives the lane back. So an I/O costs one system call
// and no hand-off between threads (v1 had one shared ring and a reaper thread waking the
// submitter, two context switches per I/O, which bounded small random I/O on few cores), and
// `entries` I/Os can be in flight at once; a thread that finds every lane busy waits for one.
//
// ReadAll is for a thread with several reads at once (the runs of a fragmented shard): it
// queues them on its lane, up to kLaneEntries at a time, and waits for them together, so the
// device is notified once per group rather than per read.
//
// WriteAll is for a thread with many writes at once (the engine's committer): a ring of
// kBatchEntries, on which it submits them all in one system call, so the device is notified
// once rather than per write, then, once they have completed, an fdatasync, called by the
// thread that waited for them (an fsync on the ring would go to an io-wq worker and wake the
// waiter again: two hand-offs a batch).
// StartWriteAll/FinishWriteAll are its two halves, for several such batches in flight, each on
// a ring of its own; StartEarlyWrites/ContinueWriteAll split the start in two again.
//
// ReadAsync is for a thread that must not wait (a target's transport thread): it queues the
// read on one more ring, shared by every caller, and returns; a completion thread (started on
// first use) reaps that ring and runs each read's callback. One system call per read for the
// submitter, one wake-up of the completion thread per batch of completions. A thread with an
// event loop of its own can instead have a ThreadQueue: its reads then go to that ring, whose
// event fd the loop watches, and complete on the thread itself (no completion thread, no
// hand-off back to it).
//
// Thread safety: ReadAt/WriteAt/WriteAll/StartWriteAll/ReadAsync may be called from any thread
// (a batch's FinishWriteAll from any one thread). Destroy the ring only when no call is in flight; the destructor waits for
// the asynchronous reads still queued and stops the completion thread.
#pragma once

#include <liburing.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
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

  // One read of a ReadAll call; `result` receives the bytes read (maybe short) or -errno.
  struct Read {
    uint64_t offset = 0;
    void* buf = nullptr;
    size_t length = 0;
    int64_t result = 0;
  };
  // Issues the reads through one lane, kLaneEntries at a time, and blocks until all are done.
  // Returns 0, or -errno when the ring itself failed (reads that did not run have that result).
  int ReadAll(int fd, std::span<Read> reads);

  // One write of a WriteAll call; `result` receives the bytes written (maybe short) or -errno.
  struct Write {
    uint64_t offset = 0;
    const void* buf = nullptr;
    size_t length = 0;
    int64_t result = 0;
  };
  // Issues every write at once and, when `datasync`, an fdatasync that starts after all of them
  // have completed; blocks until everything is done. Returns the fdatasync's result (0 or
  // -errno; 0 without `datasync`), or -errno when the ring itself failed (then writes that did
  // not run have that result too).
  int WriteAll(int fd, std::span<Write> writes, bool datasync);

  // WriteAll in two halves, so that a caller can have several batches in flight (the engine's
  // committer overlaps one batch's flush with the next one's writes). StartWriteAll queues the
  // writes on a batch ring of their own and submits them, without waiting; FinishWriteAll
  // waits for them, then runs the fdatasync, and returns what WriteAll would have. Up to
  // kBatchRings batches are in flight at once: one more waits in StartWriteAll for the
  // oldest's ring. Each batch's fdatasync is ordered after its own writes only. `writes` must
  // stay valid until FinishWriteAll, which every started batch must reach.
  class PendingWrites;
  std::unique_ptr<PendingWrites> StartWriteAll(int fd, std::span<Write> writes, bool datasync);
  int FinishWriteAll(std::unique_ptr<PendingWrites> pending);
  // StartWriteAll in two steps, for a caller that has some writes before it knows the rest:
  // StartEarlyWrites submits `writes` at once; ContinueWriteAll adds the batch's other writes
  // and its fdatasync, which then starts after all of them. `writes` there holds the early
  // writes first, in the same order (the array may have moved: results go to the new one),
  // then the others. FinishWriteAll without ContinueWriteAll just waits for the early writes.
  std::unique_ptr<PendingWrites> StartEarlyWrites(int fd, std::span<Write> writes);
  void ContinueWriteAll(PendingWrites& pending, std::span<Write> writes, bool datasync);

  // Starts a pread of `length` bytes at `offset` into `buf` and returns at once; `done` (taken)
  // runs once on the completion thread with the bytes read (maybe short) or -errno. Returns
  // false, leaving `done` to the caller and starting nothing, when kAsyncEntries reads are
  // already in flight or the asynchronous ring cannot be used (the caller reads another way).
  using ReadDone = std::function<void(int64_t result)>;
  bool ReadAsync(int fd, uint64_t offset, void* buf, size_t length, ReadDone& done);

  // A ring of one thread's asynchronous reads, reaped by that thread (ReadAsync on the thread
  // that UseOnThisThread made it current on goes here, whichever IoRing it is called on). Not
  // thread-safe: the owning thread submits, reaps and destroys it.
  class ThreadQueue {
   public:
    // Read bytes in flight at most, by default: Submit declines a read beyond it (one read
    // alone always goes), and its caller reads elsewhere (a target: on its I/O threads). Large
    // reads piled on a virtual disk came back slower in all: 4 MiB objects read 16 at a time
    // over three targets (~21 MiB a target in flight) ran ~40% faster with the ring kept to
    // 4–8 MiB (docs/performance.md, issue 7, sixteenth session); 4 KiB reads never reach it.
    static constexpr uint64_t kDefaultMaxBytes = 8u << 20;
    // Errors: as io_uring_queue_init, or eventfd.
    static Result<std::unique_ptr<ThreadQueue>> Create(unsigned entries, uint64_t max_bytes = kDefaultMaxBytes);
    // Waits for the reads still in flight and runs their callbacks.
    ~ThreadQueue();
    ThreadQueue(const ThreadQueue&) = delete;
    ThreadQueue& operator=(const ThreadQueue&) = delete;

    // An eventfd, signalled when completions arrive; the owner's loop watches it, reads it
    // (to re-arm) and calls Reap.
    int event_fd() const { return event_fd_; }
    // Submits the reads queued since the last call, runs the callbacks of the reads completed
    // so far (then submits what they queued); returns how many callbacks ran. The owner calls
    // it when the event fd fires and after each round of work that may have queued reads,
    // before it sleeps. Cheap when there is nothing to do: no system call.
    size_t Reap();
    // Reads queued that the kernel had no room for yet (Reap tries again): the owner's loop
    // must not sleep while there are any.
    bool has_queued() const { return queued_ > 0; }
    // As IoRing::ReadAsync, but the read is only queued: the next Reap submits it, with every
    // other read queued meanwhile (a transport thread starts several reads per round of
    // network progress: one system call and one device notification for them all). False
    // (`done` untouched) when `entries` reads, or reads of max_bytes with this one, are in
    // flight.
    bool Submit(int fd, uint64_t offset, void* buf, size_t length, ReadDone& done);
    uint64_t bytes_in_flight() const { return bytes_in_flight_; }

    // Tests: replaces io_uring_submit for this queue (to have the kernel say EAGAIN, or refuse).
    using SubmitFn = std::function<int(io_uring*)>;
    void SetSubmitForTest(SubmitFn submit) { submit_ = std::move(submit); }

   private:
    ThreadQueue() = default;
    SubmitFn submit_ = [](io_uring* ring) { return io_uring_submit(ring); };
    io_uring ring_{};
    bool ring_ready_ = false;
    bool fixed_ = false;  // the buffer pool's arena is registered with ring_
    int event_fd_ = -1;
    unsigned entries_ = 0;
    uint64_t max_bytes_ = 0;
    unsigned in_flight_ = 0;  // queued or submitted, not reaped
    unsigned queued_ = 0;     // prepared on the ring, not yet submitted
    uint64_t bytes_in_flight_ = 0;  // of the reads in flight
    struct Pending {  // a read's user data on the ring
      ReadDone done;
      uint64_t length;
    };
    std::vector<std::pair<Pending*, int64_t>> reaped_;  // Reap's scratch
    // Submits what is queued; entries the kernel refuses fail their reads with its error.
    void SubmitQueued();
  };
  // Makes `queue` (nullptr: none) the calling thread's: its ReadAsync calls use it.
  static void UseOnThisThread(ThreadQueue* queue);

  // Registered buffers: every ring made after BufferPool::ReserveArena registers the arena as
  // fixed buffer 0, and reads and writes of buffers in it use READ_FIXED / WRITE_FIXED (the
  // kernel pins nothing per I/O; fio --fixedbufs: 4 KiB random reads +7%, -10% CPU here).
  // Other buffers, and rings the kernel would not register it with (RLIMIT_MEMLOCK: said once
  // in the log), go as plain reads and writes. I/Os that went so, process-wide:
  static uint64_t registered_buffer_ios();

 private:
  struct Lane {
    io_uring ring{};
    bool fixed = false;  // the buffer pool's arena is registered with it (buffer 0)
  };

 public:
  // How far a batch got on its ring: entries prepared, submitted, and completed.
  struct BatchProgress {
    size_t queued = 0, submitted = 0, completed = 0;
  };

  class PendingWrites {  // a batch of StartWriteAll; only IoRing looks inside
   private:
    friend class IoRing;
    int fd = -1;
    std::span<Write> writes;
    bool datasync = false;
    Lane* lane = nullptr;  // null: no ring could be had (`failure` says why)
    int failure = 0;
    BatchProgress progress;  // of the entries on `lane`
  };

 private:

  // Lanes for one caller's exclusive use at a time, each a ring of `entries`, made on demand up
  // to `max`.
  class LanePool {
   public:
    LanePool(unsigned max, unsigned entries) : max_(max), entries_(entries) {}
    ~LanePool();  // exits every ring; no lane may be in use
    // An idle lane, a new one, or (all `max` busy, or no more can be made) the next one
    // released. Null, with io_uring_queue_init's -errno in `error`, when there is none and
    // none can be made.
    Lane* Acquire(int& error);
    // Gives `lane` back; a `broken` one (prepared entries left on its ring) is dropped instead.
    void Release(Lane* lane, bool broken = false);

   private:
    const unsigned max_, entries_;
    std::mutex mu_;
    std::condition_variable idle_cv_;
    std::vector<std::unique_ptr<Lane>> lanes_;  // guarded by mu_; every lane alive
    std::vector<Lane*> idle_;                   // guarded by mu_
  };

  explicit IoRing(unsigned max_lanes) : lanes_(max_lanes, kLaneEntries), batch_lanes_(kBatchRings, kBatchEntries) {}
  template <typename Prepare>
  int64_t Execute(Prepare prepare);
  static void PrepareBatchWrite(const PendingWrites& p, io_uring_sqe* sqe, size_t i);

  static constexpr unsigned kLaneEntries = 32;  // a lane's ring: one I/O, or a ReadAll group
  static constexpr unsigned kBatchEntries = 256;
  static constexpr unsigned kBatchRings = 4;
  static constexpr unsigned kAsyncEntries = 256;

  void ReapLoop();  // the completion thread of the asynchronous ring

  LanePool lanes_;        // ReadAt, WriteAt, ReadAll
  LanePool batch_lanes_;  // WriteAll, StartWriteAll

  std::mutex async_mu_;               // submissions to the asynchronous ring
  std::unique_ptr<Lane> async_lane_;  // guarded by async_mu_ (the reaper only reaps it)
  std::condition_variable async_idle_cv_;  // async_in_flight_ fell to 0
  unsigned async_in_flight_ = 0;      // guarded by async_mu_
  bool async_failed_ = false;         // guarded by async_mu_: the ring could not be made
  std::thread reaper_;
};

}  // namespace penstock::engine
