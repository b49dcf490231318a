// stripe_heads.cc — object heads (the records naming an object's stripes): blocking reads,
// writes and deletes with the client's retry policy.
//
// An unprotected container's head is one shard, like its stripes. A protected container's head
// is replicated on head_copies() targets (HeadRedundancy): a read asks every copy and returns
// the newest (highest version); a delete writes an empty tombstone with a newer version, so
// that a copy on a target that was down cannot bring the object back.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"
#include "common/await.h"

namespace penstock {

using stripe_io_internal::Clock;
using stripe_io_internal::MapMovedDuringRead;
using stripe_io_internal::Ordinal;
using stripe_io_internal::SawReplaced;

namespace {

// A blocking latch for the head operations.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
};

// The copies of a head being read (ReadHeadOnce).
struct HeadReads : Waiter {
  uint32_t pending = 0, ok = 0;
  std::vector<std::optional<Result<ShardData>>> replies;
};

// Waits for the copies asked (`asked` of them) to answer. Copies that have not answered after a
// straggler's time (a stopped target) are left out; with one copy in hand, the others get that
// long to show a newer version.
void WaitForCopies(HeadReads& st, size_t asked, std::chrono::milliseconds straggler) {
  std::unique_lock<std::mutex> l(st.mu);
  const auto first = Clock::now();
  st.cv.wait_until(l, first + straggler, [&] { return st.pending == 0 || st.ok > 0; });
  st.cv.wait_until(l, first + 2 * straggler, [&] { return st.pending == 0; });
  if (st.pending > 0 && asked > 1) {
    bool answered = false;
    for (auto& r : st.replies) answered |= r.has_value();
    if (!answered) st.cv.wait(l, [&] { return st.pending == 0 || st.ok > 0; });  // nothing to go on
  }
}

// The newest copy among the replies (null: none), the first error, and whether every copy
// that answered holds none.
struct NewestCopy {
  ShardData* best = nullptr;
  Status first_error;
  bool all_not_found = true;
};

NewestCopy FindNewestCopy(std::vector<std::optional<Result<ShardData>>>& replies) {
  NewestCopy n;
  for (auto& r : replies) {
    if (!r) continue;
    if (r->ok()) {
      n.all_not_found = false;
      if (n.best == nullptr || (*r)->version > n.best->version) n.best = &**r;
    } else {
      if (r->status().code() != StatusCode::kNotFound) n.all_not_found = false;
      if (n.first_error.ok() || n.first_error.code() == StatusCode::kNotFound) n.first_error = r->status();
    }
  }
  return n;
}

}  // namespace

Result<ShardData> StripeIo::ReadHeadOnce(const Redundancy& red, const WireShardKey& key) {
  const uint32_t copies = red.head_copies();
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  PS_ASSIGN_OR_RETURN(std::vector<TargetRef> slots, ReadSlots(key, copies));
  auto st = std::make_shared<HeadReads>();
  st->replies.resize(slots.size());
  std::vector<uint32_t> send;
  for (uint32_t i = 0; i < slots.size(); ++i) {
    if (slots[i].up || copies == 1) send.push_back(i);
  }
  if (send.empty()) return Unavailable("every target holding " + Ordinal(key) + " is down");
  st->pending = static_cast<uint32_t>(send.size());
  for (uint32_t i : send) {
    ReadShardTo(copies, slots[i], WithShard(key, i), 0, UINT64_MAX, [st, i](Result<ShardData> r) {
      std::lock_guard<std::mutex> l(st->mu);
      if (r.ok()) ++st->ok;
      st->replies[i] = std::move(r);
      --st->pending;
      st->cv.notify_all();
    });
  }
  WaitForCopies(*st, send.size(), straggler_);
  std::unique_lock<std::mutex> l(st->mu);
  for (uint32_t i : send) {
    if (!st->replies[i]) Suspect(slots[i]);
  }
  // As for replica reads (ReadReplica): an answer without every copy's version (one late,
  // failing or suspected) stands only if mgmt's map is still the one the read was placed with.
  bool all_checked = true;
  for (uint32_t i = 0; i < slots.size(); ++i) all_checked &= Checked(slots[i], st->replies[i]);
  auto confirmed = [&]() -> Status {
    if (all_checked) return OkStatus();
    l.unlock();  // late replies may land meanwhile
    stats_.map_confirmations++;
    if (view_->Refresh().ok() && view_->epoch() == placed_at) return OkStatus();
    return MapMovedDuringRead(key);
  };
  NewestCopy newest = FindNewestCopy(st->replies);
  if (newest.best == nullptr && !newest.all_not_found) return newest.first_error;
  std::optional<ShardData> found;
  if (newest.best != nullptr) found = std::move(*newest.best);
  PS_RETURN_IF_ERROR(confirmed());
  if (!found) return NotFound("no copy of the head");
  if (found->data.empty()) return NotFound("the object was deleted (tombstone)");
  return std::move(*found);
}

Result<ShardData> StripeIo::ReadHead(const Redundancy& red, const WireShardKey& key) {
  if (!red.protected_()) {
    uint64_t version = 0;
    auto got = shards_->Read(key, &version);
    if (!got.ok() && got.status().code() == StatusCode::kNotFound && view_->has_earlier_placements()) {
      // Not moved to its target yet: where an earlier placement put it.
      auto r = Await<Result<ShardData>>([&](auto done) {
        AskEarlierHolders(1, key, got.status(),
                          [this, key](const TargetRef& t, std::function<void(Result<ShardData>)> cb) {
                            shards_->StartReadTo(t, key, 0, UINT64_MAX, std::move(cb));
                          },
                          std::move(done));
      });
      if (r.ok() || r.status().code() != StatusCode::kNotFound) return r;
    }
    PS_ASSIGN_OR_RETURN(AlignedBuffer data, std::move(got));
    ShardData d;
    d.length = data.size();
    d.version = version;
    d.data = std::move(data);
    return d;
  }
  const auto first = Clock::now();
  bool refetched = false;
  for (int attempt = 0;; ++attempt) {
    auto r = ReadHeadOnce(red, key);
    if (r.ok() || r.status().code() == StatusCode::kNotFound) return r;
    const StatusCode code = r.status().code();
    if (!refetched && (code == StatusCode::kPermissionDenied || code == StatusCode::kUnauthenticated)) {
      refetched = true;  // the refused token was dropped: the next attempt fetches a fresh one
      continue;
    }
    if (!shards_->Backoff(r.status(), first, attempt)) return r;
  }
}

Redundancy HeadRedundancy(const Redundancy& red) {
  if (!red.protected_()) return red;
  Redundancy r;
  r.kind = Redundancy::Kind::kReplicate;
  r.k = 1;
  r.m = red.m;
  // As many faults covered once acknowledged as the data's quorum covers: quorum - K + 1 copies.
  const uint32_t covered = red.quorum() > red.k ? red.quorum() - red.k : 0;
  r.min_durable = std::min(covered + 1, r.width());
  return r;
}

void StripeIo::StartWriteHead(const Redundancy& red, const WireShardKey& key,
                              std::shared_ptr<const AlignedBuffer> bytes, uint64_t version,
                              std::function<void(Status)> done, std::optional<RetryPolicy> retry,
                              std::shared_ptr<ReplacedHead> replaced) {
  Write(StripeGeometry::For(HeadRedundancy(red), 0), key, std::move(bytes), version, std::move(done), std::move(retry),
        nullptr, std::move(replaced));
}

Status StripeIo::WriteHead(const Redundancy& red, const WireShardKey& key, std::span<const std::byte> bytes,
                           uint64_t version, std::chrono::steady_clock::time_point give_up_at,
                           std::shared_ptr<ReplacedHead> replaced) {
  auto late = [&] {
    return DeadlineExceeded("the head of the object was not written in time (its data was written too long ago "
                            "and may have been collected as orphans); put it again");
  };
  if (Clock::now() > give_up_at) return late();
  auto data = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(bytes));
  const auto first = Clock::now();
  bool refetched = false;
  // One attempt at a time (the unprotected head too), so that none starts after `give_up_at`.
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0 && Clock::now() > give_up_at) return late();
    // The protected write's own stale-map retries stop at `give_up_at` too (the policy retries
    // nothing transient: `wanted` is false, this loop backs off).
    Status s = red.protected_()
                   ? Await<Status>([&](auto done) {
                       Write(StripeGeometry::For(HeadRedundancy(red), 0), key, data, version, std::move(done),
                             RetryPolicy{give_up_at, [] { return false; }}, nullptr, replaced);
                     })
                   : Await<Status>([&](auto done) {
                       shards_->StartWrite(key, data->span(), version, std::move(done), SawReplaced(replaced));
                     });
    if (s.ok()) return s;
    if (!refetched && (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kUnauthenticated)) {
      refetched = true;
      continue;
    }
    // An unprotected head's one target down for mgmt: nothing to wait for (as ShardClient).
    if (red.protected_() ? !shards_->Backoff(s, first, attempt) : !shards_->ShouldRetry(s, key, first, attempt)) {
      return s;
    }
  }
}

Status StripeIo::DeleteHead(const Redundancy& red, const WireShardKey& key, uint64_t version,
                            std::shared_ptr<ReplacedHead> deleted) {
  if (!red.protected_()) {
    // Where an earlier placement put it first (as DeleteOnce): every copy must go, or a read
    // would find it there. (What such a copy named is not asked: orphan collection frees it.)
    PS_ASSIGN_OR_RETURN(bool was_earlier, DeleteEarlier(1, key, /*everywhere=*/true));
    Status s = shards_->Delete(key, SawReplaced(deleted));
    if (s.code() == StatusCode::kNotFound && was_earlier) return OkStatus();  // not moved yet
    return s;
  }
  return WriteHead(red, key, {}, version, Clock::time_point::max(), std::move(deleted));  // tombstone
}

}  // namespace penstock
