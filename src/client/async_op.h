// async_op.h — one asynchronous ranged operation in flight (AsyncOp) and the registry that
// lets callers cancel operations and expires their deadlines (OpTracker).
//
// An operation fans out into sub-operations (one per stripe touched). It completes exactly
// once: when its last sub-operation finishes, or earlier when cancelled or past its deadline,
// whichever comes first (Finish() arbitrates). After it completed, sub-operations still in
// flight find `finished` set and never touch the caller's buffers. Thread-safe.
//
// Zero-copy reads: the transport may receive reply bytes straight into the caller's buffers
// (OpDestination). While such a transfer runs the op is "lent": it can still be decided
// (cancelled, expired), but its completion is delivered only once every transfer into its
// buffers ended, so the caller gets its memory back exactly when the completion arrives.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "common/thread_pool.h"
#include "penstock/object_io.h"

namespace penstock {

class OpTracker;

struct AsyncOp {
  OpId id = 0;
  OpTracker* tracker = nullptr;
  CompletionQueue* cq = nullptr;
  uint64_t user_data = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::vector<IoVec> iov;

  std::mutex mu;
  bool finished = false;  // guarded by mu
  int pending = 0;        // sub-operations outstanding, guarded by mu
  Status error;           // first error, guarded by mu
  uint64_t bytes = 0;     // guarded by mu
  // Runs once all sub-operations succeeded, instead of finishing at once (a write uses it to
  // grow the object's size first). Must eventually call Finish().
  std::function<void(const std::shared_ptr<AsyncOp>&)> on_success;
  int lent = 0;                     // transfers writing into the buffers now, guarded by mu
  std::optional<IoCompletion> held;  // decided while lent: delivered when lent drops to 0 (mu)
  std::vector<std::function<void()>> after_lent;  // run when lent drops to 0 (mu)

  // Completes the operation with `s` unless it already completed. True if this call did.
  bool Finish(Status s, uint64_t bytes_done);

  // Lends the buffers to a transfer: false once the operation completed. Each true is matched
  // by one Unlend, when the transfer ended; the last one delivers a held completion after
  // running `after_lent`. Lend is called with `mu` held.
  bool LendLocked();
  static void Unlend(const std::shared_ptr<AsyncOp>& op);
  // The caller's memory for bytes [op_offset, op_offset + length) of the operation, in order.
  std::vector<std::span<std::byte>> IovSpans(uint64_t op_offset, uint64_t length) const;

  // Registers one more sub-operation.
  void AddPending(int n = 1);
  // A sub-operation finished: records its error and bytes; the last one completes the op.
  static void SubDone(const std::shared_ptr<AsyncOp>& op, const Status& s, uint64_t bytes_done);

  // Copies between the caller's scatter/gather list and a contiguous range that starts
  // `op_offset` bytes into the operation. Callers hold `mu` and check `finished` first.
  void CopyToIov(uint64_t op_offset, std::span<const std::byte> src);
  void CopyFromIov(uint64_t op_offset, std::span<std::byte> dst) const;
  void ZeroIov(uint64_t op_offset, uint64_t length);
  uint64_t iov_bytes() const;
};

// Registry of operations that may be cancelled or carry deadlines; a watchdog thread completes
// expired operations with kDeadlineExceeded (checked every few milliseconds).
class OpTracker {
 public:
  OpTracker();
  ~OpTracker();

  // Assigns op->id and registers it.
  void Add(const std::shared_ptr<AsyncOp>& op);
  void Remove(OpId id);
  // Completes `id` with kCancelled if still pending.
  bool Cancel(OpId id);
  // Runs blocking work an operation needs (head updates) off the transport threads; the
  // tracker's destructor finishes what is queued.
  void RunBlocking(std::function<void()> fn) { blocking_.Submit(std::move(fn)); }

 private:
  void Watch();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<OpId> next_id_{1};
  std::map<OpId, std::weak_ptr<AsyncOp>> ops_;
  std::thread watchdog_;
  ThreadPool blocking_{8, "ps-client-wait"};  // last: destroyed (drained) first; threads mostly wait on the network
};

}  // namespace penstock
