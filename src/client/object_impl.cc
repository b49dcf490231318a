#include "client/object_impl.h"

#include <algorithm>
#include <cstring>

namespace penstock {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ObjectImpl::ObjectImpl(ShardClient* shards, OpTracker* tracker, uint64_t container_id,
                       WireShardKey head_key, ObjectHead head)
    : shards_(shards),
      tracker_(tracker),
      container_id_(container_id),
      head_key_(head_key),
      name_(head.name),
      head_(std::move(head)),
      version_(static_cast<uint64_t>(NowMs()) * 1000) {
  written_end_ = head_.size;
}

uint64_t ObjectImpl::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return head_.size;
}

uint64_t ObjectImpl::NextVersion() { return version_.fetch_add(1); }

StripeLayout ObjectImpl::Layout() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {container_id_, head_.data_hi, head_.data_lo, head_.size, head_.stripe_unit};
}

std::shared_ptr<AsyncOp> ObjectImpl::NewOp(std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                                           std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto op = std::make_shared<AsyncOp>();
  op->cq = &cq;
  op->user_data = user_data;
  op->deadline = deadline;
  op->iov = std::move(iov);
  cq.Started();
  tracker_->Add(op);
  return op;
}

OpId ObjectImpl::ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                           std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto op = NewOp(std::move(iov), cq, user_data, deadline);
  StartRead(op, offset);
  return op->id;
}

OpId ObjectImpl::WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data,
                            std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto op = NewOp(std::move(iov), cq, user_data, deadline);
  StartWrite(op, offset);
  return op->id;
}

std::vector<OpId> ObjectImpl::Submit(std::span<const IoRequest> batch, CompletionQueue& cq) {
  std::vector<OpId> ids;
  ids.reserve(batch.size());
  for (const IoRequest& r : batch) {
    ids.push_back(r.kind == IoKind::kRead ? ReadAsync(r.offset, r.iov, cq, r.user_data, r.deadline)
                                          : WriteAsync(r.offset, r.iov, cq, r.user_data, r.deadline));
  }
  return ids;
}

void ObjectImpl::StartRead(const std::shared_ptr<AsyncOp>& op, uint64_t offset) {
  const StripeLayout layout = Layout();
  const uint64_t want = op->iov_bytes();
  const uint64_t end = offset >= layout.size ? offset : std::min(layout.size, offset + want);
  if (end <= offset || layout.stripe_unit == 0) {
    op->Finish(OkStatus(), 0);
    return;
  }
  const uint64_t su = layout.stripe_unit;
  const uint64_t first = offset / su, last = (end - 1) / su;
  op->AddPending(static_cast<int>(last - first + 1) + 1);  // +1 held while issuing
  for (uint64_t s = first; s <= last; ++s) {
    const uint64_t begin = std::max(offset, s * su) - s * su;
    const uint64_t stop = std::min(end, (s + 1) * su) - s * su;
    const uint64_t op_off = s * su + begin - offset;
    const uint64_t len = stop - begin;
    shards_->StartReadRange(layout.key(s), begin, len, [op, op_off, len](Result<AlignedBuffer> r) {
      Status st;
      {
        std::lock_guard<std::mutex> lock(op->mu);
        if (!op->finished) {
          if (r.ok()) {
            uint64_t got = std::min<uint64_t>(r->size(), len);
            op->CopyToIov(op_off, r->span().first(got));
            op->ZeroIov(op_off + got, len - got);  // shorter shard: the rest was never written
          } else if (r.status().code() == StatusCode::kNotFound) {
            op->ZeroIov(op_off, len);  // sparse: a stripe never written reads as zeros
          } else {
            st = r.status();
          }
        }
      }
      AsyncOp::SubDone(op, st, st.ok() ? len : 0);
    });
  }
  AsyncOp::SubDone(op, OkStatus(), 0);
}

void ObjectImpl::StartWrite(const std::shared_ptr<AsyncOp>& op, uint64_t offset) {
  const StripeLayout layout = Layout();
  const uint64_t len = op->iov_bytes();
  const uint64_t su = layout.stripe_unit;
  if (len == 0) {
    op->Finish(OkStatus(), 0);
    return;
  }
  if (offset > UINT64_MAX - len) {
    op->Finish(InvalidArgument("write range overflows"), 0);
    return;
  }
  const uint64_t end = offset + len;
  const uint64_t first = offset / su, last = (end - 1) / su;
  op->on_success = [self = shared_from_this(), end, len](const std::shared_ptr<AsyncOp>& o) {
    self->ExtendSize(end, [o, len](Status s) { o->Finish(s, s.ok() ? len : 0); });
  };
  op->AddPending(static_cast<int>(last - first + 1) + 1);
  for (uint64_t s = first; s <= last; ++s) {
    const uint64_t begin = std::max(offset, s * su) - s * su;
    const uint64_t stop = std::min(end, (s + 1) * su) - s * su;
    // The caller's bytes are copied now, so a cancelled write never reads freed memory.
    auto data = std::make_shared<AlignedBuffer>(stop - begin);
    op->CopyFromIov(s * su + begin - offset, data->span());
    WithStripe(s, [self = shared_from_this(), op, layout, s, begin, data] {
      self->WriteStripe(op, layout, s, begin, data);
    });
  }
  AsyncOp::SubDone(op, OkStatus(), 0);
}

void ObjectImpl::WriteStripe(const std::shared_ptr<AsyncOp>& op, const StripeLayout& layout, uint64_t stripe,
                             uint64_t begin, std::shared_ptr<AlignedBuffer> data) {
  const uint64_t su = layout.stripe_unit;
  const uint64_t stop = begin + data->size();
  auto self = shared_from_this();
  auto finish = [self, op, stripe, su, stop](Status s) {
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->written_end_ = std::max(self->written_end_, stripe * su + stop);
    }
    self->ReleaseStripe(stripe);
    AsyncOp::SubDone(op, s, 0);
  };
  bool skip;
  {
    std::lock_guard<std::mutex> lock(op->mu);
    skip = op->finished;  // cancelled or expired before this stripe's turn
  }
  if (skip) return finish(Cancelled("operation ended before stripe " + std::to_string(stripe) + " was written"));
  uint64_t known_end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    known_end = std::max(head_.size, written_end_);
  }
  // What the stripe holds ends at most at the object's known end; a write from the stripe's
  // start to (at least) there replaces all of it, so no read is needed.
  const bool whole = begin == 0 && (stop == su || stripe * su + stop >= known_end);
  if (whole) {
    shards_->StartWrite(layout.key(stripe), data->span(), NextVersion(),
                        [data, finish](Status s) { finish(std::move(s)); });
    return;
  }
  shards_->StartRead(layout.key(stripe), [self, layout, stripe, begin, stop, data, finish](Result<AlignedBuffer> old) {
    if (!old.ok() && old.status().code() != StatusCode::kNotFound) return finish(old.status());
    const uint64_t old_len = old.ok() ? old->size() : 0;
    auto merged = std::make_shared<AlignedBuffer>(std::max(old_len, stop));
    std::memset(merged->data(), 0, merged->size());
    if (old_len) std::memcpy(merged->data(), old->data(), old_len);
    std::memcpy(merged->data() + begin, data->data(), data->size());
    self->shards_->StartWrite(layout.key(stripe), merged->span(), self->NextVersion(),
                              [merged, finish](Status s) { finish(std::move(s)); });
  });
}

void ObjectImpl::WithStripe(uint64_t stripe, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = stripe_queue_.try_emplace(stripe);
    if (!inserted) {
      it->second.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void ObjectImpl::ReleaseStripe(uint64_t stripe) {
  std::function<void()> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stripe_queue_.find(stripe);
    if (it->second.empty()) {
      stripe_queue_.erase(it);
      return;
    }
    next = std::move(it->second.front());
    it->second.pop_front();
  }
  next();
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
  ObjectHead h = head_;
  h.size = wanted_size_;
  h.mtime_ms = NowMs();
  auto bytes = std::make_shared<std::vector<std::byte>>(EncodeObjectHead(h));
  lock.unlock();
  auto self = shared_from_this();
  shards_->StartWrite(head_key_, *bytes, NextVersion(), [self, bytes, h](Status s) {
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
    for (auto& fn : ready) fn(s.ok() ? s : s.WithContext("updating the size of '" + h.name + "'"));
  });
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
  const StripeLayout layout = Layout();
  const uint64_t su = layout.stripe_unit;
  if (new_size < layout.size) {
    // Cut the stripe that holds the new end, then drop every stripe after it.
    uint64_t keep = new_size / su;
    if (new_size % su != 0) {
      auto old = shards_->Read(layout.key(keep));
      if (old.ok() && old->size() > new_size % su) {
        PS_RETURN_IF_ERROR(shards_->Write(layout.key(keep), old->span().first(new_size % su), NextVersion()));
      } else if (!old.ok() && old.status().code() != StatusCode::kNotFound) {
        return old.status();
      }
      ++keep;
    }
    for (uint64_t s = keep; s < layout.stripe_count(); ++s) {
      Status st = shards_->Delete(layout.key(s));
      if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
    }
  }
  ObjectHead h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = head_;
  }
  h.size = new_size;
  h.mtime_ms = NowMs();
  PS_RETURN_IF_ERROR(shards_->Write(head_key_, EncodeObjectHead(h), NextVersion()));
  std::lock_guard<std::mutex> lock(mu_);
  head_ = h;
  written_end_ = std::min(written_end_, new_size);
  reserved_end_ = std::min(reserved_end_, new_size);
  wanted_size_ = std::min(wanted_size_, new_size);
  return OkStatus();
}

Status ObjectImpl::Refresh() {
  PS_ASSIGN_OR_RETURN(AlignedBuffer bytes, shards_->Read(head_key_));
  PS_ASSIGN_OR_RETURN(ObjectHead h, DecodeObjectHead(bytes.span()));
  std::lock_guard<std::mutex> lock(mu_);
  head_ = h;
  written_end_ = h.size;
  return OkStatus();
}

}  // namespace penstock
