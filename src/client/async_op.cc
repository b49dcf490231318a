#include "client/async_op.h"

#include <cstring>

#include "client/completion_queue_access.h"

namespace penstock {

bool AsyncOp::Finish(Status s, uint64_t bytes_done) {
  bool hold;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (finished) return false;
    finished = true;
    hold = lent > 0;
    if (hold) held = IoCompletion{user_data, s, bytes_done};
  }
  if (tracker) tracker->Remove(id);
  if (!hold) CompletionQueueAccess::Complete(*cq, IoCompletion{user_data, std::move(s), bytes_done});
  return true;
}

bool AsyncOp::LendLocked() {
  if (finished) return false;
  ++lent;
  return true;
}

void AsyncOp::Unlend(const std::shared_ptr<AsyncOp>& op) {
  std::vector<std::function<void()>> after;
  std::optional<IoCompletion> completion;
  {
    std::lock_guard<std::mutex> lock(op->mu);
    if (--op->lent > 0) return;
    after.swap(op->after_lent);
  }
  for (auto& fn : after) fn();
  {
    std::lock_guard<std::mutex> lock(op->mu);
    if (op->lent > 0) return;  // lent again meanwhile: that transfer's Unlend delivers
    completion.swap(op->held);
  }
  if (completion) CompletionQueueAccess::Complete(*op->cq, std::move(*completion));
}

void AsyncOp::AddPending(int n) {
  std::lock_guard<std::mutex> lock(mu);
  pending += n;
}

void AsyncOp::SubDone(const std::shared_ptr<AsyncOp>& op, const Status& s, uint64_t bytes_done) {
  bool last;
  Status error;
  uint64_t total;
  {
    std::lock_guard<std::mutex> lock(op->mu);
    if (!s.ok() && op->error.ok()) op->error = s;
    op->bytes += bytes_done;
    last = --op->pending == 0;
    error = op->error;
    total = op->bytes;
  }
  if (!last) return;
  if (error.ok() && op->on_success) {
    op->on_success(op);
  } else {
    op->Finish(error, error.ok() ? total : 0);
  }
}

uint64_t AsyncOp::iov_bytes() const {
  uint64_t n = 0;
  for (const auto& v : iov) n += v.size;
  return n;
}

namespace {

// Calls fn(iov byte pointer, range offset, length) for each piece of [op_offset, +length).
template <typename Fn>
void ForEachPiece(const std::vector<IoVec>& iov, uint64_t op_offset, uint64_t length, Fn fn) {
  uint64_t base = 0, done = 0;
  for (const auto& v : iov) {
    if (done == length) return;
    uint64_t begin = op_offset + done;
    if (begin < base + v.size) {
      uint64_t in = begin - base;
      uint64_t n = std::min<uint64_t>(v.size - in, length - done);
      fn(static_cast<std::byte*>(v.data) + in, done, n);
      done += n;
    }
    base += v.size;
  }
}

}  // namespace

void AsyncOp::CopyToIov(uint64_t op_offset, std::span<const std::byte> src) {
  ForEachPiece(iov, op_offset, src.size(), [&](std::byte* p, uint64_t off, uint64_t n) {
    std::memcpy(p, src.data() + off, n);
  });
}

void AsyncOp::CopyFromIov(uint64_t op_offset, std::span<std::byte> dst) const {
  ForEachPiece(iov, op_offset, dst.size(), [&](std::byte* p, uint64_t off, uint64_t n) {
    std::memcpy(dst.data() + off, p, n);
  });
}

std::vector<std::span<std::byte>> AsyncOp::IovSpans(uint64_t op_offset, uint64_t length) const {
  std::vector<std::span<std::byte>> out;
  ForEachPiece(iov, op_offset, length, [&](std::byte* p, uint64_t, uint64_t n) { out.emplace_back(p, n); });
  return out;
}

void AsyncOp::ZeroIov(uint64_t op_offset, uint64_t length) {
  ForEachPiece(iov, op_offset, length, [&](std::byte* p, uint64_t, uint64_t n) { std::memset(p, 0, n); });
}

OpTracker::OpTracker() : watchdog_([this] { Watch(); }) {}

OpTracker::~OpTracker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
}

void OpTracker::Add(const std::shared_ptr<AsyncOp>& op) {
  op->id = next_id_.fetch_add(1);
  op->tracker = this;
  std::lock_guard<std::mutex> lock(mu_);
  ops_[op->id] = op;
}

void OpTracker::Remove(OpId id) {
  std::lock_guard<std::mutex> lock(mu_);
  ops_.erase(id);
}

bool OpTracker::Cancel(OpId id) {
  std::shared_ptr<AsyncOp> op;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ops_.find(id);
    if (it == ops_.end()) return false;
    op = it->second.lock();
  }
  return op && op->Finish(Cancelled("operation " + std::to_string(id) + " was cancelled"), 0);
}

void OpTracker::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(5));
    auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<AsyncOp>> expired;
    for (auto& [id, weak] : ops_) {
      auto op = weak.lock();
      if (op && op->deadline && *op->deadline <= now) expired.push_back(std::move(op));
    }
    lock.unlock();
    for (auto& op : expired) {
      op->Finish(DeadlineExceeded("operation " + std::to_string(op->id) + " passed its deadline"), 0);
    }
    lock.lock();
  }
}

}  // namespace penstock
