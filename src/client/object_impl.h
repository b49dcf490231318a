// object_impl.h — the Object of object_io.h: ranged, asynchronous I/O on one open object.
//
// Reads fan out into ranged shard reads (kReadRange), one per stripe touched, or one per group
// of nearby ranges of a stripe within a batch. A request for one operation's piece lends the
// caller's buffers to the transport, which receives the reply straight into them (no copy in
// the client; see OpDestination in object_impl.cc); a group's reply is copied out of one buffer.
// Writes of a stripe from one caller buffer are sent from it when it is unprotected or written
// whole (the op's buffers are lent until every shard request reading them ended, stragglers
// included: see LentUntilReleased); other writes copy the caller's bytes. A write that covers only
// part of what a stripe holds reads the stripe, patches it and writes it whole (read-modify-
// write); writes to one stripe through this Object run one at a time, in submission order (a per-stripe queue).
// A protected stripe's write lease is handed from one queued write of it to the next (see
// HeldLease): the next renews it rather than releasing and taking it again, and a rep range
// write patches over the version the write before it left on every copy without asking them.
// When an operation's data is durable and it ended past the object's size, the head record is
// rewritten with the larger size (coalesced: one head write in flight at a time) before the
// operation completes. Transient failures (a target restarting, unreachable for a moment, a
// stale map) are retried per stripe until the operation's deadline or the client's timeout
// (StripeIo RetryPolicy). Completions run on transport threads. Thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "client/async_op.h"
#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "client/stripe_pipeline.h"
#include "protocol/object_head.h"

namespace penstock {

class ObjectImpl : public Object, public std::enable_shared_from_this<ObjectImpl> {
 public:
  // `io` and `tracker` are borrowed from the Client, which must outlive this object. `red` is
  // the container's redundancy.
  // `uncommitted`: `head` is a new object's (OpenOptions::replace), not written yet: the first
  // write or Truncate writes it, replacing whatever object has the name then.
  ObjectImpl(StripeIo* io, OpTracker* tracker, uint64_t container_id, Redundancy red, WireShardKey head_key,
             ObjectHead head, bool uncommitted = false);

  const std::string& name() const override { return name_; }
  uint64_t size() const override;

  OpId ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                 std::optional<std::chrono::steady_clock::time_point> deadline) override;
  OpId WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                  std::optional<std::chrono::steady_clock::time_point> deadline) override;
  std::vector<OpId> Submit(std::span<const IoRequest> batch, CompletionQueue& cq) override;
  bool Cancel(OpId id) override { return tracker_->Cancel(id); }

  Result<uint64_t> Read(uint64_t offset, std::span<std::byte> out) override;
  Status Write(uint64_t offset, std::span<const std::byte> data) override;
  Result<uint64_t> Append(std::span<const std::byte> data) override;
  Status Truncate(uint64_t size) override;
  Status Refresh() override;

 private:
  std::shared_ptr<AsyncOp> NewOp(std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                                 std::optional<std::chrono::steady_clock::time_point> deadline);
  // Completes `op` with kDeadlineExceeded, sending nothing, when its deadline passed before it
  // was submitted; true then.
  bool ExpiredAtStart(const std::shared_ptr<AsyncOp>& op);
  StripeLayout Layout() const;  // takes mu_

  // One op's share of one stripe: stripe bytes [begin, begin + length) go to the op's buffers
  // at op_offset.
  struct ReadPiece {
    std::shared_ptr<AsyncOp> op;
    uint64_t op_offset;
    uint64_t stripe;
    uint64_t begin;
    uint64_t length;
  };
  // Ranges of one stripe closer than this are fetched by one request.
  static constexpr uint64_t kCoalesceGap = 16 * 1024;
  // Appends the pieces of a read; false (op already completed) when there is nothing to read.
  bool PlanRead(const std::shared_ptr<AsyncOp>& op, uint64_t offset, const StripeLayout& layout,
                std::vector<ReadPiece>& pieces);
  void IssueReads(const StripeLayout& layout, std::vector<ReadPiece> pieces);
  static void DeliverRead(StripeIoStats* stats, const std::vector<ReadPiece>& group, uint64_t seg_begin,
                          Result<ShardData> r);
  void StartWrite(const std::shared_ptr<AsyncOp>& op, uint64_t offset);
  // One op's write of one stripe, waiting its turn (WithStripe): bytes [begin, begin +
  // data->size()) of the stripe, from `data`, a view of the op's buffers when `lent`. When a
  // write of a stripe ends, the writes queued behind it whose ranges touch one another (from
  // the first on, none ended) run as one write of their union, copied into one buffer (lent
  // buffers are returned then), later bytes over earlier ones, and each completes with it: a
  // stream of small writes into one stripe costs one stripe write per turn instead of one per
  // write.
  struct QueuedWrite {
    std::shared_ptr<AsyncOp> op;
    StripeLayout layout;
    uint64_t begin = 0;
    std::shared_ptr<AlignedBuffer> data;
    bool lent = false;
  };
  struct HeldLease;
  // Writes a batch taken from the queue (one write, or several whose ranges touch) as one
  // stripe write of their union. A protected stripe's lease is taken (or the handed one
  // renewed) first; the writes whose operation ended meanwhile drop out then (TakeRun).
  void WriteStripe(uint64_t stripe, std::vector<QueuedWrite> batch);
  static std::vector<std::shared_ptr<AsyncOp>> OpsOf(const std::vector<QueuedWrite>& batch);
  // Returns the caller's buffers of the lent writes of `batch` (none of it was sent).
  static void ReturnLent(std::vector<QueuedWrite>& batch);
  // `data` (a view of `op`'s buffers, lent once) as the stripe write sends it: the op's buffers
  // are returned (AsyncOp::Unlend) when the last holder lets go of it, i.e. once every shard
  // request that reads it ended, stragglers included, which may be after the stripe's write
  // was decided on its quorum. The op's completion is held until then (AsyncOp::held), so the
  // caller's memory is never read after the completion is delivered.
  static std::shared_ptr<AlignedBuffer> LentUntilReleased(std::shared_ptr<AsyncOp> op,
                                                          std::shared_ptr<AlignedBuffer> data);
  // Stripe bytes [first, first + buffer size) the batch writes: a lone write's own data (a
  // view of the caller's buffers when lent), or a copy of every write, later bytes over earlier
  // ones (lent buffers are returned then).
  std::pair<uint64_t, std::shared_ptr<AlignedBuffer>> Union(const std::vector<QueuedWrite>& batch) const;
  // Of a batch about to be sent under the stripe's lease: completes those whose operation ended
  // (kCancelled; their bytes must not land), returns the first run of the others whose ranges
  // touch, and puts the rest back at the front of the stripe's queue, in order.
  std::vector<QueuedWrite> TakeRun(uint64_t stripe, std::vector<QueuedWrite> batch);
  // Stripe bytes [begin, stop) the writes of `batch` (not empty) cover together.
  static std::pair<uint64_t, uint64_t> Span(const std::vector<QueuedWrite>& batch);
  // Whether `w`'s range overlaps or adjoins stripe bytes [begin, stop).
  static bool Touches(const QueuedWrite& w, uint64_t begin, uint64_t stop);
  // What a write whose operation ended before its stripe's turn completes with (kCancelled).
  static Status EndedBefore(uint64_t stripe);
  // A stripe write of `batch` ended with `s`: returns lent memory, notes the written end, ends
  // the stripe's turn (ReleaseStripe, handing on `lease` or releasing it; after a failure it is
  // released) and completes each write's part.
  void EndStripeWrite(uint64_t stripe, const std::vector<QueuedWrite>& batch, Status s, std::shared_ptr<HeldLease> lease);
  // Whether `w` may join a merged write of stripe bytes [begin, stop) that starts with `first`:
  // ranges touch, its operation has not ended, and the same stripes (layout).
  static bool Mergeable(const QueuedWrite& w, const QueuedWrite& first, uint64_t begin, uint64_t stop);
  // A protected stripe's write lease while this Object's writes of the stripe hand it on: the
  // next queued write renews it (one kLockStripe with the same token) instead of the release and
  // a new lease, and knows the version the write before it left (StripeKnowledge). It is
  // released when no write of the stripe is queued, after a failed write, or after kLeaseWrites
  // writes or kLeaseHold since it was granted, so that other writers get their turn.
  struct HeldLease {
    WireShardKey key;
    TargetRef holder;
    uint64_t token = 0;
    std::chrono::steady_clock::time_point granted;
    int writes = 0;  // under this grant
    std::shared_ptr<StripeKnowledge> known = std::make_shared<StripeKnowledge>();
  };
  static constexpr int kLeaseWrites = 64;
  static constexpr std::chrono::milliseconds kLeaseHold{1000};
  // Takes the lease of `key`'s stripe, or renews `handed` (the one the write before passed on):
  // when that renewal was no renewal (it had lapsed, or another slot's target grants it now),
  // what it knew is forgotten.
  void TakeLease(const StripeGeometry& geo, const WireShardKey& key, std::shared_ptr<HeldLease> handed,
                 RetryPolicy retry, std::function<void(Result<std::shared_ptr<HeldLease>>)> done);
  // The part of WriteStripe that runs holding the stripe's write lease (protected stripes;
  // `known` is the lease's, null for unprotected ones).
  void WriteLeasedStripe(const std::vector<std::shared_ptr<AsyncOp>>& ops, const StripeGeometry& geo,
                         const WireShardKey& key,
                         uint64_t begin, std::shared_ptr<AlignedBuffer> data, std::shared_ptr<StripeKnowledge> known,
                         std::function<void(Status)> done);
  // Read-modify-write of the whole unit (an ec range StripeIo::WriteRange cannot patch).
  void RewriteUnit(const std::vector<std::shared_ptr<AsyncOp>>& ops, const StripeGeometry& geo, const WireShardKey& key,
                   uint64_t begin, std::shared_ptr<AlignedBuffer> data, std::shared_ptr<StripeKnowledge> known,
                   std::function<void(Status)> done);
  // Per-stripe serialisation of writes: runs `w` now or after the writes queued before it.
  void WithStripe(uint64_t stripe, QueuedWrite w);
  // Ends a write's turn at `stripe`: runs the next queued write, handing it `lease` when it may
  // go on (see HeldLease); otherwise the lease (if any) is released.
  void ReleaseStripe(uint64_t stripe, std::shared_ptr<HeldLease> lease);
  // Grows the committed size to at least `end` (head rewrite), then calls done.
  void ExtendSize(uint64_t end, std::function<void(Status)> done);
  void StartHeadWrite(std::unique_lock<std::mutex>& lock);
  // Blocking (OpTracker::RunBlocking): under the head's lease, re-reads the head and writes it
  // back with size max(stored, wanted), so writers in other clients never shrink each other's
  // size. kAborted when the object was replaced by a put, kNotFound when it was deleted.
  Result<ObjectHead> CommitSize(uint64_t wanted);
  // Under the head's write lease: reads the stored head, applies `change`, writes it back.
  // kNotFound when the object was deleted, kAborted when a put replaced it (other data).
  Result<ObjectHead> RewriteHead(const std::function<void(ObjectHead&)>& change);
  // Blocking: runs `fn` holding the write lease of `key`'s stripe (taken within the client's
  // retry budget) and releases it.
  Status WithLeaseSync(const StripeGeometry& g, const WireShardKey& key, const std::function<Status()>& fn);
  static uint64_t NextVersion() { return NewVersion(); }

  // Objects stored in their head, and objects opened with OpenOptions::replace
  // (object_inline.cc).
  // Serves a read of an inline object from its head; false when the object is not inline.
  bool ReadInline(const std::shared_ptr<AsyncOp>& op, uint64_t offset);
  // Takes a write the stripe path must not run now: the first write of an uncommitted object
  // at offset 0 of at most kMaxInlineBytes (written as an inline head: one shard write per head
  // copy), and writes of an inline object or while one is being written or moved to stripes
  // (parked until then). False: the stripe path runs it.
  bool TakeWrite(const std::shared_ptr<AsyncOp>& op, uint64_t offset);
  void WriteInlineHead(const std::shared_ptr<AsyncOp>& op, uint64_t version);
  void InlineHeadWritten(const std::shared_ptr<AsyncOp>& op, const ObjectHead& h, Status s);
  // Blocking: under the head's lease, writes an inline object's bytes to its stripes and its
  // head without them (another client may have done so already), so ranged writes can patch it.
  Status MoveInlineToStripes();
  void StartMoveInline();
  // Runs the writes parked while an inline write or move was in flight (or fails them with `s`).
  void Unpark(const Status& s);
  // An uncommitted object's head write (RewriteHead): no lease, no read, a new version.
  Result<ObjectHead> CommitNewHead(const std::function<void(ObjectHead&)>& change);
  // A replace-open's head writes ask what head they replace (a ReplacedHead; null once the
  // object is committed); once ours is written, the stripes of a replaced head that named other
  // data are deleted. Best effort: stripes left behind are orphans mgmt's repair service collects.
  std::shared_ptr<ReplacedHead> Replacing(uint64_t version);
  void FreeReplaced(const ReplacedHead& replaced);
  std::pair<uint64_t, uint64_t> DataId() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {head_.data_hi, head_.data_lo};
  }
  // Stripe operations for `ops` retry transient failures until the latest of their deadlines
  // (or the client's retry budget) while one of them is still pending.
  RetryPolicy RetryFor(const std::vector<std::shared_ptr<AsyncOp>>& ops) const;

  StripeIo* io_;
  OpTracker* tracker_;
  const uint64_t container_id_;
  const Redundancy red_;
  const WireShardKey head_key_;
  const std::string name_;
  // Stripe write leases: each acquisition takes its own token (NextLeaseToken), so two of this
  // Object's holdings of one stripe (a write and a truncate; a write and the release of the one
  // before it, which may arrive late over another worker's connection) exclude each other as
  // two clients' do: a lease is never re-entrant, and a late release never ends a newer holding.
  uint64_t NextLeaseToken() {
    return owner_ + lease_seq_.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull;
  }
  const uint64_t owner_;  // random: the base of this Object's lease tokens
  std::atomic<uint64_t> lease_seq_{1};

  mutable std::mutex mu_;
  ObjectHead head_;            // head_.size: the committed size
  uint64_t written_end_ = 0;   // end of the furthest stripe write that completed
  uint64_t reserved_end_ = 0;  // for Append
  std::map<uint64_t, std::deque<QueuedWrite>> stripe_queue_;  // busy stripes: the writes waiting
  std::map<uint64_t, std::shared_ptr<HeldLease>> handed_;  // leases passed to a stripe's next write
  bool head_write_in_flight_ = false;
  bool uncommitted_ = false;      // see the constructor
  bool inline_busy_ = false;      // an inline head write or a move to stripes is in flight
  std::vector<std::pair<std::shared_ptr<AsyncOp>, uint64_t>> parked_;  // writes (op, offset) waiting for it
  uint64_t wanted_size_ = 0;
  std::vector<std::pair<uint64_t, std::function<void(Status)>>> size_waiters_;
};

}  // namespace penstock
