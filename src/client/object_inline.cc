// object_inline.cc — ObjectImpl's objects stored in their head, and objects opened with
// OpenOptions::replace.
//
// A replace-open sends nothing: the Object holds a new head (fresh data id, size 0) that its
// first write commits. When that write starts at offset 0 and holds at most kMaxInlineBytes,
// the bytes go into the head itself: one shard write per head copy (one request per target,
// riding the target's group commit like any write), no stripe, no lease, and the object's next
// reader reads its head and has its bytes. Any other first write goes to the stripes and then
// writes the head directly (CommitNewHead: the put's commit point, no lease, no read).
// Either head write asks its targets what head it replaces (kWriteReturnReplaced), so the
// stripes a replaced object named are freed at once, without a read round trip.
//
// An inline object is moved to its stripes before anything changes it in place (a write,
// Truncate): under the head's lease its bytes are written as stripes of its data id and its
// head rewritten without them (MoveInlineToStripes). Writes that arrive meanwhile are parked
// and run after it. Readers holding an inline head read its bytes from it until they Refresh
// (close-to-open: a reopen sees what another client wrote and closed).
#include <cstring>

#include "client/object_impl.h"
#include "client/stripe_pipeline.h"
#include "client/write_version.h"
#include "common/await.h"

namespace penstock {

bool ObjectImpl::ReadInline(const std::shared_ptr<AsyncOp>& op, uint64_t offset) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!head_.inlined) return false;
  const uint64_t size = head_.data.size();
  const uint64_t n = offset >= size ? 0 : std::min(size - offset, op->iov_bytes());
  if (n) op->CopyToIov(0, std::span<const std::byte>(head_.data).subspan(offset, n));
  lock.unlock();
  io_->stats().read_bytes += n;
  io_->stats().read_copied += n;
  op->Finish(OkStatus(), n);
  return true;
}

bool ObjectImpl::TakeWrite(const std::shared_ptr<AsyncOp>& op, uint64_t offset) {
  std::unique_lock<std::mutex> lock(mu_);
  if (inline_busy_ || head_.inlined) {
    parked_.emplace_back(op, offset);
    if (!inline_busy_) {
      inline_busy_ = true;
      lock.unlock();
      StartMoveInline();
    }
    return true;
  }
  const bool first = uncommitted_ && written_end_ == 0 && stripe_queue_.empty() && !head_write_in_flight_;
  const bool inline_write = first && offset == 0 && op->iov_bytes() <= kMaxInlineBytes;
  inline_busy_ = inline_busy_ || inline_write;
  lock.unlock();
  if (!inline_write) return false;
  WriteInlineHead(op, NextVersion());
  return true;
}

void ObjectImpl::WriteInlineHead(const std::shared_ptr<AsyncOp>& op, uint64_t version) {
  ObjectHead h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = head_;
  }
  h.size = op->iov_bytes();
  h.inlined = true;
  h.dense = false;
  h.mtime_ms = WallClockMs();
  h.data.resize(h.size);
  op->CopyFromIov(0, h.data);
  auto bytes = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(EncodeObjectHead(h)));
  auto replaced = Replacing(version);
  // Transient failures retried as the op's stripe writes are.
  io_->StartWriteHead(
      red_, head_key_, std::move(bytes), version,
      [self = shared_from_this(), op, h = std::move(h), replaced](Status s) {
        if (replaced && s.ok()) self->FreeReplaced(*replaced);
        self->InlineHeadWritten(op, h, std::move(s));
      },
      RetryFor({op}), replaced);
}

void ObjectImpl::InlineHeadWritten(const std::shared_ptr<AsyncOp>& op, const ObjectHead& h, Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      head_ = h;
      uncommitted_ = false;
      written_end_ = h.size;
    }
  }
  op->Finish(s.ok() ? s : s.WithContext("creating object '" + name_ + "'"), s.ok() ? h.size : 0);
  Unpark(OkStatus());  // they go on as the object now is (inline: moved first)
}

void ObjectImpl::Unpark(const Status& s) {
  std::vector<std::pair<std::shared_ptr<AsyncOp>, uint64_t>> parked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inline_busy_ = false;
    parked.swap(parked_);
  }
  for (auto& [op, offset] : parked) {
    if (s.ok()) {
      StartWrite(op, offset);
    } else {
      op->Finish(s, 0);
    }
  }
}

void ObjectImpl::StartMoveInline() {
  tracker_->RunBlocking([self = shared_from_this()] { self->Unpark(self->MoveInlineToStripes()); });
}

Status ObjectImpl::MoveInlineToStripes() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!head_.inlined) return OkStatus();
  }
  ObjectHead moved;
  Status s = WithLeaseSync({HeadRedundancy(red_), 1, 1}, head_key_, [&]() -> Status {
    PS_ASSIGN_OR_RETURN(ShardData stored, io_->ReadHead(red_, head_key_));
    PS_ASSIGN_OR_RETURN(ObjectHead current, DecodeObjectHead(stored.data.span()));
    const auto [hi, lo] = DataId();
    if (current.data_hi != hi || current.data_lo != lo) {
      return Aborted("object '" + name_ + "' was replaced by another client's put; reopen it to write");
    }
    moved = current;
    if (!current.inlined) return OkStatus();  // another client moved it
    moved.inlined = false;
    moved.data.clear();
    moved.dense = false;
    const StripeLayout layout{container_id_, moved.data_hi, moved.data_lo, moved.size, moved.stripe_unit, red_, false};
    const uint64_t version = NewerThan(NextVersion(), stored.version);
    for (uint64_t i = 0; i < layout.stripe_count(); ++i) {
      const auto bytes = std::span<const std::byte>(current.data).subspan(i * layout.stripe_unit, layout.stripe_length(i));
      auto buf = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(bytes));
      PS_RETURN_IF_ERROR(io_->WriteSync(layout.geometry(), layout.key(i), buf, version));
    }
    return io_->WriteHead(red_, head_key_, EncodeObjectHead(moved), version);
  });
  if (!s.ok()) return s.WithContext("moving object '" + name_ + "' out of its head to write it");
  std::lock_guard<std::mutex> lock(mu_);
  head_ = std::move(moved);
  written_end_ = head_.size;
  return OkStatus();
}

Result<ObjectHead> ObjectImpl::CommitNewHead(const std::function<void(ObjectHead&)>& change) {
  ObjectHead h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = head_;
  }
  change(h);
  h.mtime_ms = WallClockMs();
  h.dense = false;
  const uint64_t version = NextVersion();
  auto replaced = Replacing(version);
  Status s = io_->WriteHead(red_, head_key_, EncodeObjectHead(h), version,
                            std::chrono::steady_clock::time_point::max(), replaced);
  if (!s.ok()) return s;
  if (replaced) FreeReplaced(*replaced);
  std::lock_guard<std::mutex> lock(mu_);
  uncommitted_ = false;
  return h;
}

std::shared_ptr<ReplacedHead> ObjectImpl::Replacing(uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  return uncommitted_ ? std::make_shared<ReplacedHead>(version) : nullptr;
}

void ObjectImpl::FreeReplaced(const ReplacedHead& replaced) {
  const auto [hi, lo] = DataId();
  const std::optional<ObjectHead> old = replaced.OtherObject(hi, lo);
  if (!old) return;
  const StripeLayout layout{container_id_, old->data_hi, old->data_lo, old->size, old->stripe_unit, red_, false};
  tracker_->RunBlocking([io = io_, layout, n = old->stripe_count()] { DeleteStripes(*io, layout, n); });
}

}  // namespace penstock
