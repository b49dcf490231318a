#include "client/object_impl.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "client/completion_queue_access.h"
#include "client/object_ids.h"
#include "common/await.h"

namespace penstock {

namespace {

// The caller's buffers for bytes [op_offset, op_offset + length) of `op`, lent to one transfer
// per byte range at a time. A result that arrives in a buffer is copied in only once no
// transfer into the op's memory is running (AsyncOp::after_lent), so a late transfer cannot
// overwrite it.
class OpDestination : public StripeDestination {
 public:
  OpDestination(std::shared_ptr<AsyncOp> op, uint64_t op_offset, uint64_t length)
      : op_(std::move(op)), op_offset_(op_offset), length_(length) {}

  std::vector<std::span<std::byte>> Borrow(uint64_t at, uint64_t length) override {
    if (at > length_ || length > length_ - at) return {};
    std::lock_guard<std::mutex> lock(op_->mu);
    for (auto [b, e] : lent_) {
      if (at < e && b < at + length) return {};  // another transfer writes there now
    }
    if (!op_->LendLocked()) return {};
    lent_.emplace_back(at, at + length);
    return op_->IovSpans(op_offset_ + at, length);
  }
  void Return(uint64_t at, uint64_t length) override {
    {
      std::lock_guard<std::mutex> lock(op_->mu);
      auto it = std::find(lent_.begin(), lent_.end(), std::make_pair(at, at + length));
      if (it != lent_.end()) lent_.erase(it);
    }
    AsyncOp::Unlend(op_);
  }
  void Zero(uint64_t at, uint64_t length) override {
    std::lock_guard<std::mutex> lock(op_->mu);
    if (!op_->finished) op_->ZeroIov(op_offset_ + at, length);
  }

 private:
  const std::shared_ptr<AsyncOp> op_;
  const uint64_t op_offset_, length_;
  std::vector<std::pair<uint64_t, uint64_t>> lent_;  // guarded by op_->mu
};

// The read length that returns all a stripe holds: none/rep the whole shard, ec the whole unit
// (zero-padded past the stripe's data).
uint64_t HeldBytesToRead(const StripeGeometry& g) {
  return g.red.kind == Redundancy::Kind::kErasure ? g.stripe_unit : UINT64_MAX;
}

// Whether two layouts put stripe i under the same key and bounds (a Refresh() after another
// client's put changes the data id, and may change the stripe unit).
bool SameStripes(const StripeLayout& a, const StripeLayout& b) {
  return a.container == b.container && a.data_hi == b.data_hi && a.data_lo == b.data_lo &&
         a.stripe_unit == b.stripe_unit;
}

bool SameKey(const WireShardKey& a, const WireShardKey& b) {
  return a.container == b.container && a.object_hi == b.object_hi && a.object_lo == b.object_lo &&
         a.stripe == b.stripe && a.shard == b.shard;
}

}  // namespace

ObjectImpl::ObjectImpl(StripeIo* io, OpTracker* tracker, uint64_t container_id, Redundancy red,
                       WireShardKey head_key, ObjectHead head, bool uncommitted)
    : io_(io),
      tracker_(tracker),
      container_id_(container_id),
      red_(red),
      head_key_(head_key),
      name_(head.name),
      owner_(NewDataId().first),  // random (a thread-local generator: no device read per Object)
      head_(std::move(head)),
      uncommitted_(uncommitted) {
  written_end_ = head_.size;
}

uint64_t ObjectImpl::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return head_.size;
}

StripeLayout ObjectImpl::Layout() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {container_id_, head_.data_hi, head_.data_lo, head_.size, head_.stripe_unit, red_, head_.dense};
}

std::shared_ptr<AsyncOp> ObjectImpl::NewOp(std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                                           std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto op = std::make_shared<AsyncOp>();
  op->cq = &cq;
  op->user_data = user_data;
  op->deadline = deadline;
  op->iov = std::move(iov);
  CompletionQueueAccess::Started(cq);
  tracker_->Add(op);
  return op;
}

bool ObjectImpl::ExpiredAtStart(const std::shared_ptr<AsyncOp>& op) {
  if (!op->deadline || *op->deadline > std::chrono::steady_clock::now()) return false;
  op->Finish(DeadlineExceeded("operation " + std::to_string(op->id) +
                              " was submitted after its deadline; nothing was sent"), 0);
  return true;
}

OpId ObjectImpl::ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                           std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto op = NewOp(std::move(iov), cq, user_data, deadline);
  if (ExpiredAtStart(op) || ReadInline(op, offset)) return op->id;
  std::vector<ReadPiece> pieces;
  const StripeLayout layout = Layout();
  if (PlanRead(op, offset, layout, pieces)) {
    IssueReads(layout, std::move(pieces));
    AsyncOp::SubDone(op, OkStatus(), 0);
  }
  return op->id;
}

OpId ObjectImpl::WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                            std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto op = NewOp(std::move(iov), cq, user_data, deadline);
  if (!ExpiredAtStart(op)) StartWrite(op, offset);
  return op->id;
}

std::vector<OpId> ObjectImpl::Submit(std::span<const IoRequest> batch, CompletionQueue& cq) {
  // Reads of the whole batch are planned together so that nearby ranges of one stripe share a
  // request; writes go out one by one (per-stripe order is kept by the stripe queue).
  std::vector<OpId> ids;
  ids.reserve(batch.size());
  const StripeLayout layout = Layout();
  std::vector<ReadPiece> pieces;
  std::vector<std::shared_ptr<AsyncOp>> planned;
  for (const IoRequest& r : batch) {
    if (r.kind == IoKind::kWrite) {
      ids.push_back(WriteAsync(r.offset, r.iov, cq, r.user_data, r.deadline));
      continue;
    }
    auto op = NewOp(r.iov, cq, r.user_data, r.deadline);
    ids.push_back(op->id);
    if (!ExpiredAtStart(op) && !ReadInline(op, r.offset) && PlanRead(op, r.offset, layout, pieces)) {
      planned.push_back(op);
    }
  }
  IssueReads(layout, std::move(pieces));
  for (auto& op : planned) AsyncOp::SubDone(op, OkStatus(), 0);
  return ids;
}

bool ObjectImpl::PlanRead(const std::shared_ptr<AsyncOp>& op, uint64_t offset, const StripeLayout& layout,
                          std::vector<ReadPiece>& pieces) {
  const uint64_t want = op->iov_bytes();
  const uint64_t end = offset >= layout.size ? offset : std::min(layout.size, offset + want);
  if (end <= offset || layout.stripe_unit == 0) {
    op->Finish(OkStatus(), 0);  // empty, or entirely past the end: a short (empty) read
    return false;
  }
  const uint64_t su = layout.stripe_unit;
  const uint64_t first = offset / su, last = (end - 1) / su;
  op->AddPending(static_cast<int>(last - first + 1) + 1);  // +1 released by the caller once issued
  for (uint64_t s = first; s <= last; ++s) {
    const uint64_t begin = std::max(offset, s * su) - s * su;
    const uint64_t stop = std::min(end, (s + 1) * su) - s * su;
    pieces.push_back({op, s * su + begin - offset, s, begin, stop - begin});
  }
  return true;
}

void ObjectImpl::IssueReads(const StripeLayout& layout, std::vector<ReadPiece> pieces) {
  std::sort(pieces.begin(), pieces.end(), [](const ReadPiece& a, const ReadPiece& b) {
    return a.stripe != b.stripe ? a.stripe < b.stripe : a.begin < b.begin;
  });
  size_t i = 0;
  while (i < pieces.size()) {
    // One request covers pieces of the same stripe closer than kCoalesceGap to each other.
    size_t j = i + 1;
    uint64_t seg_begin = pieces[i].begin, seg_end = pieces[i].begin + pieces[i].length;
    while (j < pieces.size() && pieces[j].stripe == pieces[i].stripe &&
           pieces[j].begin <= seg_end + kCoalesceGap) {
      seg_end = std::max(seg_end, pieces[j].begin + pieces[j].length);
      ++j;
    }
    auto group = std::make_shared<std::vector<ReadPiece>>(pieces.begin() + static_cast<std::ptrdiff_t>(i),
                                                          pieces.begin() + static_cast<std::ptrdiff_t>(j));
    std::vector<std::shared_ptr<AsyncOp>> ops;
    for (const ReadPiece& p : *group) ops.push_back(p.op);
    // A request for one piece is received straight into the caller's buffers.
    std::shared_ptr<StripeDestination> into;
    if (group->size() == 1) into = std::make_shared<OpDestination>(pieces[i].op, pieces[i].op_offset, pieces[i].length);
    io_->Read(layout.geometry(), layout.key(pieces[i].stripe), seg_begin, seg_end - seg_begin,
              [stats = &io_->stats(), group, seg_begin, dense = layout.dense, stripe = pieces[i].stripe,
               name = name_](Result<ShardData> r) {
                if (dense && !r.ok() && r.status().code() == StatusCode::kNotFound) {
                  // Not a hole: every stripe of a dense object was written.
                  r = DataLoss("stripe " + std::to_string(stripe) + " of object '" + name +
                               "' is missing: " + r.status().message());
                }
                DeliverRead(stats, *group, seg_begin, std::move(r));
              },
              RetryFor(ops), std::move(into));
    i = j;
  }
}

void ObjectImpl::DeliverRead(StripeIoStats* stats, const std::vector<ReadPiece>& group, uint64_t seg_begin,
                             Result<ShardData> r) {
  // Bytes in a buffer wait for transfers still running into the op's memory (a late replica).
  if (r.ok() && r->placed == 0 && group.size() == 1) {
    const auto& op = group.front().op;
    std::unique_lock<std::mutex> lock(op->mu);
    if (op->lent > 0 && !op->finished) {
      auto shared = std::make_shared<Result<ShardData>>(std::move(r));
      op->after_lent.push_back(
          [stats, group, seg_begin, shared] { DeliverRead(stats, group, seg_begin, std::move(*shared)); });
      return;
    }
  }
  for (const ReadPiece& p : group) {
    Status st;
    {
      std::lock_guard<std::mutex> lock(p.op->mu);
      if (!p.op->finished) {  // a finished (cancelled, expired) op's buffers are not ours
        if (r.ok()) {
          const uint64_t from = p.begin - seg_begin;
          const auto& bytes = r->data;
          uint64_t got;
          if (r->placed > 0) {  // already in the caller's buffers (group of one piece, from == 0)
            got = std::min<uint64_t>(r->placed, p.length);
            stats->read_placed += got;
          } else {
            got = bytes.size() > from ? std::min<uint64_t>(bytes.size() - from, p.length) : 0;
            if (got) p.op->CopyToIov(p.op_offset, bytes.span().subspan(from, got));
            stats->read_copied += got;
          }
          stats->read_bytes += got;
          p.op->ZeroIov(p.op_offset + got, p.length - got);  // never written: zeros
        } else if (r.status().code() == StatusCode::kNotFound) {
          p.op->ZeroIov(p.op_offset, p.length);  // sparse: a stripe never written reads as zeros
        } else {
          st = r.status();
        }
      }
    }
    AsyncOp::SubDone(p.op, st, st.ok() ? p.length : 0);
  }
}

void ObjectImpl::StartWrite(const std::shared_ptr<AsyncOp>& op, uint64_t offset) {
  const uint64_t len = op->iov_bytes();
  if (len == 0) {
    op->Finish(OkStatus(), 0);
    return;
  }
  if (offset > UINT64_MAX - len) {
    op->Finish(InvalidArgument("write range overflows"), 0);
    return;
  }
  if (TakeWrite(op, offset)) return;
  const StripeLayout layout = Layout();
  const uint64_t su = layout.stripe_unit;
  const uint64_t end = offset + len;
  const uint64_t first = offset / su, last = (end - 1) / su;
  op->on_success = [self = shared_from_this(), end, len](const std::shared_ptr<AsyncOp>& o) {
    self->ExtendSize(end, [o, len](Status s) { o->Finish(s, s.ok() ? len : 0); });
  };
  op->AddPending(static_cast<int>(last - first + 1) + 1);
  for (uint64_t s = first; s <= last; ++s) {
    const uint64_t begin = std::max(offset, s * su) - s * su;
    const uint64_t stop = std::min(end, (s + 1) * su) - s * su;
    // A stripe's bytes in one caller buffer are sent from there: the op's buffers are lent until
    // every request reading them ended (a cancelled op completes after that; a protected
    // stripe's stragglers may outlive its write, see LentUntilReleased). Protected stripes are
    // lent only when written whole (range writes and read-modify-writes keep their own copy).
    // Otherwise the bytes are copied now.
    std::shared_ptr<AlignedBuffer> data;
    bool lent = false;
    if (!layout.red.protected_() || (begin == 0 && stop == su)) {
      auto spans = op->IovSpans(s * su + begin - offset, stop - begin);
      std::lock_guard<std::mutex> lock(op->mu);
      if (spans.size() == 1 && op->LendLocked()) {
        data = std::make_shared<AlignedBuffer>(AlignedBuffer::Borrowed(spans[0]));
        lent = true;
      }
    }
    if (!lent) {
      data = std::make_shared<AlignedBuffer>(stop - begin);
      op->CopyFromIov(s * su + begin - offset, data->span());
    }
    WithStripe(s, {op, layout, begin, std::move(data), lent});
  }
  AsyncOp::SubDone(op, OkStatus(), 0);
}

void ObjectImpl::WriteStripe(uint64_t stripe, std::vector<QueuedWrite> batch) {
  std::shared_ptr<HeldLease> handed;  // by the write of this stripe before this one
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = handed_.find(stripe); it != handed_.end()) {
      handed = std::move(it->second);
      handed_.erase(it);
    }
  }
  const std::vector<std::shared_ptr<AsyncOp>> ops = OpsOf(batch);
  bool skip = true;  // cancelled or expired before this stripe's turn (a merged batch: each of them)
  for (const auto& op : ops) {
    std::lock_guard<std::mutex> lock(op->mu);
    skip = skip && op->finished;
  }
  if (skip) {  // the lease, if one was handed, is released
    if (batch.size() > 1) {
      for (const QueuedWrite& w : batch) {
        if (w.lent) AsyncOp::Unlend(w.op);  // not copied into a union: returned here
      }
    }
    return EndStripeWrite(stripe, batch, EndedBefore(stripe), handed);
  }
  const StripeLayout& layout = batch[0].layout;
  const StripeGeometry geo = layout.geometry();
  const WireShardKey key = layout.key(stripe);
  auto self = shared_from_this();
  // An unprotected stripe is one shard and each write of it one atomic shard operation (whole
  // or range), which reads nothing another writer could change: no lease.
  if (!geo.red.protected_()) {
    auto [begin, data] = Union(batch);
    return WriteLeasedStripe(ops, geo, key, begin, data, nullptr, [self, stripe, batch](Status s) {
      self->EndStripeWrite(stripe, batch, std::move(s), nullptr);
    });
  }
  // A protected stripe's write lease first: writers in other clients (other Objects) take
  // turns, so the versions and bytes a write reads are the stripe's latest, every copy or cell
  // applies the writes in one order, and no update is lost.
  TakeLease(geo, key, std::move(handed), RetryFor(ops),
            [self, stripe, geo, key, batch = std::move(batch)](Result<std::shared_ptr<HeldLease>> lease) mutable {
              if (!lease.ok()) {
                ReturnLent(batch);  // nothing was sent
                return self->EndStripeWrite(stripe, batch, lease.status(), nullptr);
              }
              auto held = *lease;
              // Nothing of it was sent yet: the writes whose operation ended while the batch
              // waited (cancelled, expired) drop out, for only writes already sent may land after
              // that; the first touching run of the others goes, the rest wait at the front of
              // the queue.
              std::vector<QueuedWrite> run = self->TakeRun(stripe, std::move(batch));
              if (run.empty()) return self->EndStripeWrite(stripe, {}, EndedBefore(stripe), held);
              auto [begin, data] = self->Union(run);
              if (run.size() == 1 && run[0].lent) {  // sent from the caller's buffer
                data = LentUntilReleased(run[0].op, std::move(data));
                run[0].lent = false;  // returned by the last request that reads it, not here
              }
              self->WriteLeasedStripe(OpsOf(run), geo, key, begin, data, held->known,
                                      [self, stripe, run, held](Status s) {
                                        self->EndStripeWrite(stripe, run, std::move(s), held);
                                      });
            });
}

void ObjectImpl::ReturnLent(std::vector<QueuedWrite>& batch) {
  for (QueuedWrite& w : batch) {
    if (std::exchange(w.lent, false)) AsyncOp::Unlend(w.op);
  }
}

std::shared_ptr<AlignedBuffer> ObjectImpl::LentUntilReleased(std::shared_ptr<AsyncOp> op,
                                                             std::shared_ptr<AlignedBuffer> data) {
  AlignedBuffer* view = data.get();
  return {view, [op = std::move(op), data = std::move(data)](AlignedBuffer*) mutable {
            data.reset();
            AsyncOp::Unlend(op);
          }};
}

std::vector<std::shared_ptr<AsyncOp>> ObjectImpl::OpsOf(const std::vector<QueuedWrite>& batch) {
  std::vector<std::shared_ptr<AsyncOp>> ops;
  ops.reserve(batch.size());
  for (const QueuedWrite& w : batch) ops.push_back(w.op);
  return ops;
}

Status ObjectImpl::EndedBefore(uint64_t stripe) {
  return Cancelled("operation ended before stripe " + std::to_string(stripe) + " was written");
}

std::pair<uint64_t, uint64_t> ObjectImpl::Span(const std::vector<QueuedWrite>& batch) {
  uint64_t begin = batch[0].begin, stop = begin;
  for (const QueuedWrite& w : batch) {
    begin = std::min(begin, w.begin);
    stop = std::max(stop, w.begin + w.data->size());
  }
  return {begin, stop};
}

bool ObjectImpl::Touches(const QueuedWrite& w, uint64_t begin, uint64_t stop) {
  return w.begin <= stop && w.begin + w.data->size() >= begin;
}

std::pair<uint64_t, std::shared_ptr<AlignedBuffer>> ObjectImpl::Union(const std::vector<QueuedWrite>& batch) const {
  if (batch.size() == 1) return {batch[0].begin, batch[0].data};
  const auto [begin, stop] = Span(batch);
  auto merged = std::make_shared<AlignedBuffer>(stop - begin);
  for (const QueuedWrite& w : batch) {
    std::memcpy(merged->data() + (w.begin - begin), w.data->data(), w.data->size());
    if (w.lent) AsyncOp::Unlend(w.op);  // copied: the caller's memory is free
  }
  io_->stats().merged_writes += batch.size() - 1;
  return {begin, std::move(merged)};
}

std::vector<ObjectImpl::QueuedWrite> ObjectImpl::TakeRun(uint64_t stripe, std::vector<QueuedWrite> batch) {
  std::vector<QueuedWrite> run, rest;
  uint64_t begin = 0, stop = 0;  // run's span
  for (QueuedWrite& w : batch) {
    bool ended;
    {
      std::lock_guard<std::mutex> lock(w.op->mu);
      ended = w.op->finished;
    }
    if (ended) {
      if (w.lent) AsyncOp::Unlend(w.op);  // nothing of it was sent
      AsyncOp::SubDone(w.op, EndedBefore(stripe), 0);
    } else if (run.empty() || (rest.empty() && Touches(w, begin, stop))) {
      const uint64_t end = w.begin + w.data->size();
      begin = run.empty() ? w.begin : std::min(begin, w.begin);
      stop = run.empty() ? end : std::max(stop, end);
      run.push_back(std::move(w));
    } else {
      rest.push_back(std::move(w));
    }
  }
  if (!rest.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& waiting = stripe_queue_[stripe];
    waiting.insert(waiting.begin(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  }
  return run;
}

void ObjectImpl::EndStripeWrite(uint64_t stripe, const std::vector<QueuedWrite>& batch, Status s,
                                std::shared_ptr<HeldLease> lease) {
  if (batch.size() == 1 && batch[0].lent) AsyncOp::Unlend(batch[0].op);  // its sends ended: the memory is free
  if (s.ok() && !batch.empty()) {
    const uint64_t stop = Span(batch).second;
    std::lock_guard<std::mutex> lock(mu_);
    written_end_ = std::max(written_end_, stripe * batch[0].layout.stripe_unit + stop);
  }
  if (!s.ok() && lease) {  // after a failure the next write takes the lease anew
    io_->UnlockStripe(lease->holder, lease->key, lease->token);
    lease.reset();
  }
  ReleaseStripe(stripe, std::move(lease));
  for (const QueuedWrite& w : batch) AsyncOp::SubDone(w.op, s, 0);
}

void ObjectImpl::TakeLease(const StripeGeometry& geo, const WireShardKey& key, std::shared_ptr<HeldLease> handed,
                           RetryPolicy retry, std::function<void(Result<std::shared_ptr<HeldLease>>)> done) {
  auto lease = handed;
  if (!lease) {
    lease = std::make_shared<HeldLease>();
    lease->key = key;
    lease->token = NextLeaseToken();
  }
  auto self = shared_from_this();
  io_->LockStripe(geo, key, lease->token, std::move(retry),
                  [self, lease, renewing = handed != nullptr, done = std::move(done)](Result<StripeLease> got) {
                    if (!got.ok()) {
                      if (renewing) self->io_->UnlockStripe(lease->holder, lease->key, lease->token);
                      return done(got.status());
                    }
                    const bool same_holder = renewing && got->holder.id == lease->holder.id;
                    if (!(same_holder && got->renewed)) {
                      // A new grant: another writer may have held the lease and written since.
                      if (renewing && !same_holder) self->io_->UnlockStripe(lease->holder, lease->key, lease->token);
                      *lease->known = {};
                    }
                    // The chain's bound (kLeaseWrites, kLeaseHold) counts from the first grant
                    // at this holder: a target from before LockReplyHeader never says
                    // "renewed", and restarting the count there let one Object hold the
                    // stripe for as long as it kept writing.
                    if (!same_holder) {
                      lease->granted = std::chrono::steady_clock::now();
                      lease->writes = 0;
                    }
                    lease->holder = got->holder;
                    ++lease->writes;
                    done(lease);
                  });
}

void ObjectImpl::WriteLeasedStripe(const std::vector<std::shared_ptr<AsyncOp>>& ops, const StripeGeometry& geo,
                                   const WireShardKey& key, uint64_t begin, std::shared_ptr<AlignedBuffer> data,
                                   std::shared_ptr<StripeKnowledge> known, std::function<void(Status)> done) {
  const uint64_t stop = begin + data->size();
  if (begin == 0 && stop == geo.stripe_unit) {  // replaces all the stripe can hold: no read
    io_->Write(geo, key, data, NextVersion(), std::move(done), RetryFor(ops), std::move(known));
    return;
  }
  // Part of the unit: patched in place (range writes: only these bytes, and for ec the same
  // range of parity, travel and reach the disk). An ec range that cannot be patched so is a
  // read-modify-write of the unit (below).
  auto self = shared_from_this();
  io_->WriteRange(geo, key, begin, data, NextVersion(),
                  [self, ops, geo, key, begin, data, known, done](Status s) {
                    if (!NeedsWholeUnit(s)) return done(std::move(s));
                    self->RewriteUnit(ops, geo, key, begin, data, known, done);
                  },
                  RetryFor(ops), known);
}

void ObjectImpl::RewriteUnit(const std::vector<std::shared_ptr<AsyncOp>>& ops, const StripeGeometry& geo,
                             const WireShardKey& key,
                             uint64_t begin, std::shared_ptr<AlignedBuffer> data,
                             std::shared_ptr<StripeKnowledge> known, std::function<void(Status)> done) {
  const uint64_t stop = begin + data->size();
  // Read-modify-write of what the stripe holds now (another client may have written it since
  // this Object learned the size): the whole unit (ec comes back zero-padded); trailing zeros
  // read the same as absent bytes and are not kept.
  // A stripe past this Object's known end that cannot be read (a target down) is taken as
  // empty, as a single writer knows it is, so writes go on degraded.
  uint64_t known_end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    known_end = std::max(head_.size, written_end_);
  }
  const bool past_end = key.stripe * geo.stripe_unit >= known_end;
  auto self = shared_from_this();
  auto merge = [self, ops, geo, key, begin, stop, data, known, done, past_end](Result<ShardData> old) {
    if (!old.ok() && old.status().code() != StatusCode::kNotFound && !(past_end && old.status().retryable())) {
      return done(old.status());
    }
    uint64_t old_len = old.ok() ? old->data.size() : 0;
    while (old_len > stop && old->data.data()[old_len - 1] == std::byte{0}) --old_len;
    auto merged = std::make_shared<AlignedBuffer>(std::max(old_len, stop));
    std::memset(merged->data(), 0, merged->size());
    if (old_len) std::memcpy(merged->data(), old->data.data(), old_len);
    std::memcpy(merged->data() + begin, data->data(), data->size());
    // Above what it read, whatever this client's clock says (NewerThan).
    const uint64_t version = NewerThan(NextVersion(), old.ok() ? old->version : 0);
    self->io_->Write(geo, key, merged, version, done, self->RetryFor(ops), known);
  };
  io_->Read(geo, key, 0, HeldBytesToRead(geo), std::move(merge), RetryFor(ops));
}

RetryPolicy ObjectImpl::RetryFor(const std::vector<std::shared_ptr<AsyncOp>>& ops) const {
  RetryPolicy p;
  const auto budget = std::chrono::steady_clock::now() + io_->shards().retry_budget();
  p.until = std::chrono::steady_clock::time_point::min();
  std::vector<std::weak_ptr<AsyncOp>> weak;
  for (const auto& op : ops) {
    p.until = std::max(p.until, op->deadline ? *op->deadline : budget);
    weak.push_back(op);
  }
  p.wanted = [weak = std::move(weak)] {  // some operation still waits for these bytes
    for (const auto& w : weak) {
      auto op = w.lock();
      if (!op) continue;
      std::lock_guard<std::mutex> lock(op->mu);
      if (!op->finished) return true;
    }
    return false;
  };
  return p;
}

void ObjectImpl::WithStripe(uint64_t stripe, QueuedWrite w) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = stripe_queue_.try_emplace(stripe);
    if (!inserted) {
      it->second.push_back(std::move(w));
      return;
    }
  }
  std::vector<QueuedWrite> one;
  one.push_back(std::move(w));
  WriteStripe(stripe, std::move(one));
}

bool ObjectImpl::Mergeable(const QueuedWrite& w, const QueuedWrite& first, uint64_t begin, uint64_t stop) {
  if (!Touches(w, begin, stop)) return false;
  // The same stripes: a Refresh() between the two (another client's put) may have changed them.
  if (!SameStripes(w.layout, first.layout)) return false;
  std::lock_guard<std::mutex> lock(w.op->mu);
  return !w.op->finished;
}

void ObjectImpl::ReleaseStripe(uint64_t stripe, std::shared_ptr<HeldLease> lease) {
  std::vector<QueuedWrite> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stripe_queue_.find(stripe);
    auto& waiting = it->second;
    if (waiting.empty()) {
      stripe_queue_.erase(it);
    } else {
      next.push_back(std::move(waiting.front()));
      waiting.pop_front();
      // Writes queued behind it whose ranges touch the ones taken go with it, as one write (see
      // QueuedWrite).
      uint64_t begin = next[0].begin, stop = begin + next[0].data->size();
      if (Mergeable(next[0], next[0], begin, stop)) {
        while (!waiting.empty() && Mergeable(waiting.front(), next[0], begin, stop)) {
          const QueuedWrite& w = waiting.front();
          begin = std::min(begin, w.begin);
          stop = std::max(stop, w.begin + w.data->size());
          next.push_back(std::move(waiting.front()));
          waiting.pop_front();
        }
      }
      if (lease && lease->writes < kLeaseWrites && std::chrono::steady_clock::now() - lease->granted < kLeaseHold &&
          SameKey(lease->key, next[0].layout.key(stripe))) {
        handed_[stripe] = std::move(lease);
      }
    }
  }
  if (lease) io_->UnlockStripe(lease->holder, lease->key, lease->token);
  if (!next.empty()) WriteStripe(stripe, std::move(next));
}

void ObjectImpl::ExtendSize(uint64_t end, std::function<void(Status)> done) {
  std::unique_lock<std::mutex> lock(mu_);
  if (end <= head_.size) {
    lock.unlock();
    return done(OkStatus());
  }
  wanted_size_ = std::max(wanted_size_, end);
  size_waiters_.emplace_back(end, std::move(done));
  if (!head_write_in_flight_) StartHeadWrite(lock);
}

// Called with mu_ held; releases it.
void ObjectImpl::StartHeadWrite(std::unique_lock<std::mutex>& lock) {
  head_write_in_flight_ = true;
  const uint64_t wanted = wanted_size_;
  lock.unlock();
  auto self = shared_from_this();
  tracker_->RunBlocking([self, wanted] {
    Result<ObjectHead> committed = self->CommitSize(wanted);
    Status s = committed.status();
    ObjectHead h = committed.ok() ? *committed : ObjectHead{};
    std::vector<std::function<void(Status)>> ready;
    std::unique_lock<std::mutex> lock(self->mu_);
    self->head_write_in_flight_ = false;
    if (s.ok()) self->head_ = h;
    auto& w = self->size_waiters_;
    for (auto it = w.begin(); it != w.end();) {
      if (!s.ok() || it->first <= self->head_.size) {
        ready.push_back(std::move(it->second));
        it = w.erase(it);
      } else {
        ++it;
      }
    }
    if (s.ok() && !w.empty()) {
      self->StartHeadWrite(lock);
    } else {
      lock.unlock();
    }
    for (auto& fn : ready) fn(s.ok() ? s : s.WithContext("updating the size of '" + self->name_ + "'"));
  });
}

Status ObjectImpl::WithLeaseSync(const StripeGeometry& g, const WireShardKey& key, const std::function<Status()>& fn) {
  const RetryPolicy retry{std::chrono::steady_clock::now() + io_->shards().retry_budget(), {}};
  const uint64_t token = NextLeaseToken();
  PS_ASSIGN_OR_RETURN(StripeLease lease, Await<Result<StripeLease>>([&](auto done) {
                        io_->LockStripe(g, key, token, retry, std::move(done));
                      }));
  Status s = fn();
  io_->UnlockStripe(lease.holder, key, token);
  return s;
}

Result<ObjectHead> ObjectImpl::CommitSize(uint64_t wanted) {
  // Another writer may have grown it further.
  return RewriteHead([wanted](ObjectHead& h) { h.size = std::max(h.size, wanted); });
}

Result<ObjectHead> ObjectImpl::RewriteHead(const std::function<void(ObjectHead&)>& change) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (uncommitted_) {
      lock.unlock();
      return CommitNewHead(change);
    }
  }
  ObjectHead committed;
  PS_RETURN_IF_ERROR(WithLeaseSync({HeadRedundancy(red_), 1, 1}, head_key_, [&]() -> Status {
    ObjectHead h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      h = head_;
    }
    auto stored = io_->ReadHead(red_, head_key_);
    if (!stored.ok()) {
      if (stored.status().code() != StatusCode::kNotFound) return stored.status();
      return NotFound("object '" + name_ + "' was deleted by another client; its writes are gone");
    }
    PS_ASSIGN_OR_RETURN(ObjectHead current, DecodeObjectHead(stored->data.span()));
    if (current.data_hi != h.data_hi || current.data_lo != h.data_lo) {
      return Aborted("object '" + name_ + "' was replaced by another client's put; reopen it to write");
    }
    change(current);
    current.mtime_ms = WallClockMs();
    current.dense = false;  // grown or cut through this API: holes may read as zeros
    PS_RETURN_IF_ERROR(
        io_->WriteHead(red_, head_key_, EncodeObjectHead(current), NewerThan(NextVersion(), stored->version)));
    committed = current;
    return OkStatus();
  }));
  return committed;
}

Result<uint64_t> ObjectImpl::Read(uint64_t offset, std::span<std::byte> out) {
  CompletionQueue cq;
  ReadAsync(offset, {{out.data(), out.size()}}, cq, 0, std::nullopt);
  auto c = cq.Wait(1, std::chrono::hours(24));
  if (!c.front().status.ok()) return c.front().status;
  return c.front().bytes;
}

Status ObjectImpl::Write(uint64_t offset, std::span<const std::byte> data) {
  CompletionQueue cq;
  WriteAsync(offset, {{const_cast<std::byte*>(data.data()), data.size()}}, cq, 0, std::nullopt);
  return cq.Wait(1, std::chrono::hours(24)).front().status;
}

Result<uint64_t> ObjectImpl::Append(std::span<const std::byte> data) {
  uint64_t offset;
  {
    std::lock_guard<std::mutex> lock(mu_);
    offset = std::max(reserved_end_, head_.size);
    reserved_end_ = offset + data.size();
  }
  PS_RETURN_IF_ERROR(Write(offset, data));
  return offset;
}

Status ObjectImpl::Truncate(uint64_t new_size) {
  PS_RETURN_IF_ERROR(MoveInlineToStripes());  // a no-op unless the object is inline
  const StripeLayout layout = Layout();
  const uint64_t su = layout.stripe_unit;
  if (new_size < layout.size) {
    // Cut the stripe that holds the new end, then drop every stripe after it.
    const StripeGeometry geo = layout.geometry();
    uint64_t keep = new_size / su;
    if (new_size % su != 0) {  // under the stripe's write lease, as other writes of it
      const uint64_t cut = new_size % su;
      const WireShardKey key = layout.key(keep);
      PS_RETURN_IF_ERROR(WithLeaseSync(geo, key, [&]() -> Status {
        auto old = io_->ReadSync(geo, key, 0, HeldBytesToRead(geo));
        if (!old.ok()) return old.status().code() == StatusCode::kNotFound ? OkStatus() : old.status();
        if (old->data.size() <= cut) return OkStatus();
        if (geo.red.kind != Redundancy::Kind::kErasure) {
          // Zeros over the cut part: the bytes before the cut are never rewritten, so a write
          // of them racing the truncate (unprotected stripes take no lease) is never lost.
          auto zeros = std::make_shared<AlignedBuffer>(old->data.size() - cut);
          std::memset(zeros->data(), 0, zeros->size());
          Status s =
              Await<Status>([&](auto done) { io_->WriteRange(geo, key, cut, zeros, NextVersion(), std::move(done)); });
          if (!NeedsWholeUnit(s)) return s;  // rep, a copy missing while a join is not settled: whole
        }
        auto kept = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(old->data.span().first(cut)));
        return io_->WriteSync(geo, key, kept, NextVersion());
      }));
      ++keep;
    }
    for (uint64_t s = keep; s < layout.stripe_count(); ++s) {
      // Every copy: the head still names these stripes (the object may grow again).
      Status st = io_->DeleteSync(geo, layout.key(s), /*everywhere=*/true);
      if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
    }
  }
  // Under the head's lease, over the head as stored: a handle to an object that another client
  // has since replaced or deleted must not bring the old version back.
  PS_ASSIGN_OR_RETURN(ObjectHead h, RewriteHead([new_size](ObjectHead& cur) { cur.size = new_size; }));
  std::lock_guard<std::mutex> lock(mu_);
  head_ = h;
  written_end_ = std::min(written_end_, new_size);
  reserved_end_ = std::min(reserved_end_, new_size);
  wanted_size_ = std::min(wanted_size_, new_size);
  return OkStatus();
}

Status ObjectImpl::Refresh() {
  PS_ASSIGN_OR_RETURN(ShardData bytes, io_->ReadHead(red_, head_key_));
  PS_ASSIGN_OR_RETURN(ObjectHead h, DecodeObjectHead(bytes.data.span()));
  std::lock_guard<std::mutex> lock(mu_);
  head_ = h;
  written_end_ = h.size;
  uncommitted_ = false;  // a replace not committed yet is dropped: this is the object now
  return OkStatus();
}

}  // namespace penstock
